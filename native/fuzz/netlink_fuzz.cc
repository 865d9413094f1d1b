// libFuzzer harness for every parser that reads kernel replies, and for the attribute writer's
// length checks. Built by scripts/fuzz.sh with clang -fsanitize=fuzzer,address,undefined; not
// part of the addon.
#include <linux/genetlink.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ipvs/codec.h"
#include "netlink/attr.h"
#include "netlink/error.h"
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

// An attribute of a fuzzed size inside fuzzed nests is written whole or refused (kInvalid),
// refused exactly when it or a nest around it would pass 65535 bytes, and what is written reads
// back with its full length.
void WriteSized(const uint8_t* data, size_t size) {
  if (size < 3) return;
  const size_t len = (static_cast<size_t>(data[0]) << 8 | data[1]) * 2;  // 0 .. 131070
  const int depth = data[2] % 4;
  // each level's attribute length: the leaf's header and payload, a nest's header and its
  // padded child
  size_t lens[4];
  lens[depth] = nl::kAttrHeader + len;
  for (int i = depth - 1; i >= 0; i--) lens[i] = nl::kAttrHeader + nl::Align(lens[i + 1]);
  const bool fits = lens[0] <= nl::kMaxAttrLen;
  std::vector<uint8_t> buf;
  nl::AttrWriter w(buf);
  const std::vector<uint8_t> payload(len, 0xab);
  try {
    size_t tokens[4];
    for (int i = 0; i < depth; i++) tokens[i] = w.Begin(static_cast<uint16_t>(1 | nl::kNested));
    w.Put(2, payload.data(), payload.size());
    for (int i = depth - 1; i >= 0; i--) w.End(tokens[i]);
  } catch (const nl::Exception& e) {
    if (fits || e.error().kind != nl::ErrorKind::kInvalid) __builtin_trap();
    return;
  }
  if (!fits) __builtin_trap();
  nl::AttrReader r(buf.data(), buf.size());
  for (int i = 0; i <= depth; i++) {
    if (!r.Next() || r.len() + nl::kAttrHeader != lens[i]) __builtin_trap();
    if (i < depth) r = r.Nested();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Walk(nl::AttrReader(data, size), 0);
  WriteSized(data, size);
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
