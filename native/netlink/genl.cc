#include "netlink/genl.h"

#include <linux/genetlink.h>

namespace nl {

bool GenlResolver::ParseFamily(const nlmsghdr* h, GenlFamily* out, std::string* why) {
  if (h->nlmsg_type != GENL_ID_CTRL) return nl::Refuse(why, "reply is not from nlctrl");
  AttrReader r = Attributes(h, GENL_HDRLEN);
  while (r.Next()) {
    switch (r.type()) {
      case CTRL_ATTR_FAMILY_ID: out->id = r.U16(); break;
      case CTRL_ATTR_FAMILY_NAME: out->name = r.Str(); break;
      case CTRL_ATTR_VERSION: out->version = r.U32(); break;
      case CTRL_ATTR_MAXATTR: out->max_attr = r.U32(); break;
      default: break;
    }
  }
  if (!r.ok(why)) return false;
  if (out->id == 0) return nl::Refuse(why, "no CTRL_ATTR_FAMILY_ID");
  return true;
}

const GenlFamily& GenlResolver::Resolve(Socket& sock, const std::string& name, const std::string& module) {
  auto it = cache_.find(name);
  if (it != cache_.end()) return it->second;
  Batch b;
  b.Begin(GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_ACK);
  b.GenlHeader(CTRL_CMD_GETFAMILY, 1);
  b.Attrs().Str(CTRL_ATTR_FAMILY_NAME, name);
  TransactResult res = sock.Transact(b, TransactOptions{});
  const RequestResult& rr = res.results[0];
  if (rr.outcome == Outcome::kError) {
    const int err = rr.status.error;
    const std::string op = "CTRL_CMD_GETFAMILY " + name;
    Error e(ErrorKind::kKernel, err, ErrnoName(err), op, op + ": " + ErrnoText(err));
    e.extack = rr.status.extack;
    if (err == ENOENT) {
      e.kind = ErrorKind::kUnsupported;
      e.message = "the kernel has no generic netlink family " + name +
                  (module.empty() ? "" : " (kernel module " + module + " is not loaded)");
    }
    throw Exception(std::move(e));
  }
  if (res.data.empty()) ThrowDecode("CTRL_CMD_GETFAMILY", "no family in the reply");
  GenlFamily fam;
  std::string why;
  const auto* h = reinterpret_cast<const nlmsghdr*>(res.data[0].bytes.data());
  if (!ParseFamily(h, &fam, &why)) ThrowDecode("CTRL_CMD_GETFAMILY", why);
  return cache_.emplace(name, fam).first->second;
}

}  // namespace nl
