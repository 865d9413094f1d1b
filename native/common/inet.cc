#include "common/inet.h"

#include <arpa/inet.h>

#include <cstring>

namespace inet {

bool Parse(const std::string& text, Addr* out) {
  *out = Addr{};
  if (text.find(':') != std::string::npos) {
    if (inet_pton(AF_INET6, text.c_str(), out->bytes) != 1) return false;
    out->family = kV6;
    return true;
  }
  if (inet_pton(AF_INET, text.c_str(), out->bytes) != 1) return false;
  out->family = kV4;
  return true;
}

std::string Format(int family, const void* bytes) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (!inet_ntop(family == kV6 ? AF_INET6 : AF_INET, bytes, buf, sizeof buf)) return "";
  return buf;
}

std::string Format(const Addr& a) { return Format(a.family, a.bytes); }

}  // namespace inet
