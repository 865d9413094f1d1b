// libFuzzer harness for the ctnetlink flow decoder and filter. Built by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "conntrack/codec.h"
#include "netlink/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nl::ForEachMessage(data, size, [](const nlmsghdr* h) {
    ct::Flow f;
    std::string why;
    if (ct::DecodeFlow(h, &f, &why)) {
      ct::Filter any;
      ct::Filter some;
      some.proto = 17;
      some.orig_dport = 53;
      some.has_reply_src = true;
      some.reply_src = f.orig.dst;
      (void)ct::Matches(f, any);
      (void)ct::Matches(f, some);
      nl::Batch b;
      ct::EncodeDelete(b, f);
    }
    return true;
  });
  return 0;
}
