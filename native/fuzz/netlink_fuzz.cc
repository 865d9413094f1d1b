// libFuzzer harness for every parser that reads kernel replies. Built by scripts/fuzz.sh with
// clang -fsanitize=fuzzer,address,undefined; not part of the addon.
#include <linux/genetlink.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ipvs/codec.h"
#include "netlink/attr.h"
#include "netlink/genl.h"
#include "netlink/message.h"
#include "rtnl/link.h"

namespace {

void Walk(nl::AttrReader r, int depth) {
  while (r.Next()) {
    (void)r.Str();
    if (r.len() == 4) (void)r.U32();
    if (depth < 8 && r.len() >= 4) Walk(r.Nested(), depth + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Walk(nl::AttrReader(data, size), 0);
  nl::ForEachMessage(data, size, [](const nlmsghdr* h) {
    nl::Status st;
    uint32_t seq;
    std::string why;
    if (h->nlmsg_type == NLMSG_ERROR) nl::ParseError(h, &st, &seq);
    ipvs::Info info;
    ipvs::DecodeInfo(h, &info, &why);
    rtnl::Link link;
    rtnl::DecodeLink(h, &link, &why);
    nl::GenlFamily fam;
    nl::GenlResolver::ParseFamily(h, &fam, &why);
    return true;
  });
  return 0;
}
