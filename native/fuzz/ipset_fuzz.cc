// libFuzzer harness for the ipset reply decoders (LIST/SAVE/HEADER dumps, PROTOCOL, TYPE).
// Built by scripts/fuzz.sh with clang -fsanitize=fuzzer,address,undefined; not part of the addon.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ipset/codec.h"
#include "netlink/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ipset::ListAccumulator acc;
  nl::ForEachMessage(data, size, [&](const nlmsghdr* h) {
    std::string why;
    uint8_t a = 0, b = 0;
    ipset::DecodeProtocol(h, &a, &b, &why);
    ipset::DecodeType(h, &a, &b, &why);
    ipset::SetHeader hdr;
    bool has_header = false;
    std::vector<ipset::Member> members;
    ipset::DecodeList(h, &hdr, &has_header, &members, &why);
    // Message types are checked first; force the LIST type through the accumulator too.
    acc.Add(h, &why);
    return true;
  });
  return 0;
}
