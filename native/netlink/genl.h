// Generic netlink family resolution through nlctrl (CTRL_CMD_GETFAMILY), cached per socket.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "netlink/socket.h"

namespace nl {

struct GenlFamily {
  uint16_t id = 0;
  uint32_t version = 0;
  uint32_t max_attr = 0;
  std::string name;
};

class GenlResolver {
 public:
  // Throws kUnsupported (ENOENT) naming `module` when the kernel has no such family.
  const GenlFamily& Resolve(Socket& sock, const std::string& name, const std::string& module);
  static bool ParseFamily(const nlmsghdr* h, GenlFamily* out, std::string* why);

 private:
  std::map<std::string, GenlFamily> cache_;
};

}  // namespace nl
