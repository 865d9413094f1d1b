#include "rtnl/route.h"

#include <linux/rtnetlink.h>
#include <sys/socket.h>

namespace rtnl {

namespace {

void RouteMessage(nl::Batch& b, uint16_t type, uint16_t flags, const Route& r) {
  b.Begin(type, flags);
  rtmsg rtm{};
  rtm.rtm_family = r.family;
  rtm.rtm_dst_len = r.dst_len;
  rtm.rtm_table = static_cast<uint8_t>(r.table < 256 ? r.table : static_cast<uint32_t>(RT_TABLE_UNSPEC));
  rtm.rtm_protocol = r.protocol;
  rtm.rtm_scope = r.scope;
  rtm.rtm_type = r.type;
  b.Header(&rtm, sizeof rtm);
  nl::AttrWriter w = b.Attrs();
  const size_t len = r.family == AF_INET6 ? 16 : 4;
  // A default route (/0) goes without RTA_DST, as iproute2 sends it.
  if (r.dst_len) w.Put(RTA_DST, r.dst.bytes, len);
  if (r.prefsrc.family) w.Put(RTA_PREFSRC, r.prefsrc.bytes, len);
  if (r.gateway.family) w.Put(RTA_GATEWAY, r.gateway.bytes, len);
  if (r.has_priority) w.U32(RTA_PRIORITY, r.priority);
  if (r.table >= 256) w.U32(RTA_TABLE, r.table);
  if (r.oif) w.U32(RTA_OIF, static_cast<uint32_t>(r.oif));
}

bool ReadAddr(nl::AttrReader& r, uint8_t family, inet::Addr* out) {
  *out = inet::Addr{};
  out->family = family;
  return r.Fixed(out->bytes, family == AF_INET6 ? 16 : 4);
}

}  // namespace

void EncodeNewRoute(nl::Batch& b, const Route& r, bool exist) {
  RouteMessage(b, RTM_NEWROUTE, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | (exist ? NLM_F_REPLACE : NLM_F_EXCL), r);
}

void EncodeDelRoute(nl::Batch& b, const Route& r) { RouteMessage(b, RTM_DELROUTE, NLM_F_REQUEST | NLM_F_ACK, r); }

void EncodeDumpRoutes(nl::Batch& b, const RouteDumpFilter& f) {
  b.Begin(RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP);
  rtmsg rtm{};
  rtm.rtm_family = f.family;
  rtm.rtm_table = static_cast<uint8_t>(f.table < 256 ? f.table : static_cast<uint32_t>(RT_TABLE_UNSPEC));
  rtm.rtm_protocol = f.protocol;
  rtm.rtm_type = f.type;
  b.Header(&rtm, sizeof rtm);
  if (f.table >= 256) b.Attrs().U32(RTA_TABLE, f.table);
}

bool DecodeRoute(const nlmsghdr* h, Route* out, std::string* why) {
  if (h->nlmsg_type != RTM_NEWROUTE || h->nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg)))
    return nl::Refuse(why, "not an RTM_NEWROUTE message");
  const auto* rtm = static_cast<const rtmsg*>(NLMSG_DATA(h));
  if (rtm->rtm_family != AF_INET && rtm->rtm_family != AF_INET6)
    return nl::Refuse(why, "route family " + std::to_string(rtm->rtm_family) + " is neither AF_INET nor AF_INET6");
  const uint8_t max = rtm->rtm_family == AF_INET6 ? 128 : 32;
  if (rtm->rtm_dst_len > max)
    return nl::Refuse(why, "destination length " + std::to_string(rtm->rtm_dst_len) + " is out of range 0-" +
                               std::to_string(max));
  *out = Route{};
  out->family = rtm->rtm_family;
  out->dst.family = rtm->rtm_family;
  out->dst_len = rtm->rtm_dst_len;
  out->table = rtm->rtm_table;
  out->type = rtm->rtm_type;
  out->scope = rtm->rtm_scope;
  out->protocol = rtm->rtm_protocol;
  out->flags = rtm->rtm_flags;
  bool has_dst = false;
  nl::AttrReader r = nl::Attributes(h, sizeof(rtmsg));
  while (r.Next()) {
    switch (r.type()) {
      case RTA_DST: has_dst = ReadAddr(r, rtm->rtm_family, &out->dst); break;
      case RTA_PREFSRC: ReadAddr(r, rtm->rtm_family, &out->prefsrc); break;
      case RTA_GATEWAY: ReadAddr(r, rtm->rtm_family, &out->gateway); break;
      case RTA_OIF: out->oif = static_cast<int32_t>(r.U32()); break;
      case RTA_PRIORITY: nl::Store(&out->priority, r.U32(), &out->has_priority); break;
      case RTA_TABLE: out->table = r.U32(); break;
      default: break;
    }
  }
  if (!r.ok(why)) return false;
  if (!has_dst && out->dst_len != 0)
    return nl::Refuse(why, "RTM_NEWROUTE /" + std::to_string(out->dst_len) + " without RTA_DST");
  return true;
}

}  // namespace rtnl
