// libFuzzer harness for the rtnetlink link, address and route decoders. Built by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "netlink/message.h"
#include "rtnl/addr.h"
#include "rtnl/link.h"
#include "rtnl/route.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nl::ForEachMessage(data, size, [](const nlmsghdr* h) {
    std::string why;
    rtnl::Link l;
    rtnl::DecodeLink(h, &l, &why);
    rtnl::Address a;
    rtnl::DecodeAddr(h, &a, &why);
    rtnl::Route r;
    rtnl::DecodeRoute(h, &r, &why);
    return true;
  });
  return 0;
}
