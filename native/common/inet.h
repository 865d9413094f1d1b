// Address text <-> bytes, shared by every codec. Pure, no I/O.
#pragma once

#include <cstdint>
#include <string>

namespace inet {

constexpr int kV4 = 2;   // AF_INET
constexpr int kV6 = 10;  // AF_INET6

struct Addr {
  int family = 0;       // kV4 or kV6
  uint8_t bytes[16]{};  // v4 in the first 4 bytes, the rest zero (the IPVS layout)
  size_t size() const { return family == kV4 ? 4 : 16; }
};

// Parses "10.0.0.1" or "fd00::1"; false on anything else.
bool Parse(const std::string& text, Addr* out);
std::string Format(const Addr& a);
std::string Format(int family, const void* bytes);

}  // namespace inet
