// Pure codec entry points exposed for golden-byte tests and fuzzing (no socket involved).
// Families add their encoders/decoders under codec.<family>.
#include <linux/netlink.h>

#include <cstring>
#include <vector>

#include "addon/bindings.h"
#include "addon/errors.h"
#include "netlink/attr.h"
#include "netlink/message.h"

namespace addon {

Napi::Buffer<uint8_t> ToBuffer(Napi::Env env, const std::vector<uint8_t>& v) {
  return Napi::Buffer<uint8_t>::Copy(env, v.data(), v.size());
}

Napi::Object CodecNamespace(Napi::Env env, Napi::Object exports, const char* family) {
  Napi::Object codec = exports.Get("codec").As<Napi::Object>();
  Napi::Object ns = Napi::Object::New(env);
  codec.Set(family, ns);
  return ns;
}

namespace {

// Recursively parses attributes; an attribute is descended into when it carries NLA_F_NESTED
// or its type is listed in `nested` (families that do not set the flag, like IPVS).
Napi::Array ParseTree(Napi::Env env, nl::AttrReader r, const std::vector<uint32_t>& nested, int depth) {
  Napi::Array out = Napi::Array::New(env);
  uint32_t n = 0;
  while (r.Next()) {
    Napi::Object a = Napi::Object::New(env);
    a.Set("type", r.type());
    a.Set("nested", r.nested_flag());
    a.Set("netByteOrder", r.net_byteorder_flag());
    a.Set("data", Napi::Buffer<uint8_t>::Copy(env, r.data(), r.len()));
    bool descend = r.nested_flag();
    for (uint32_t t : nested)
      if (t == r.type()) descend = true;
    if (descend && depth < 16) a.Set("children", ParseTree(env, r.Nested(), nested, depth + 1));
    out.Set(n++, a);
  }
  if (!r.ok()) ThrowInvalid(env, "parseAttributes", r.error());
  return out;
}

Napi::Value ParseAttributes(const Napi::CallbackInfo& info) {
  std::vector<uint8_t> buf = BufferArg(info, 0);
  std::vector<uint32_t> nested;
  if (info.Length() > 1 && info[1].IsArray()) {
    Napi::Array a = info[1].As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); i++) nested.push_back(a.Get(i).As<Napi::Number>().Uint32Value());
  }
  return ParseTree(info.Env(), nl::AttrReader(buf.data(), buf.size()), nested, 0);
}

void WriteTree(Napi::Env env, nl::AttrWriter& w, Napi::Array spec) {
  for (uint32_t i = 0; i < spec.Length(); i++) {
    Napi::Object a = spec.Get(i).As<Napi::Object>();
    const uint16_t type = static_cast<uint16_t>(a.Get("type").As<Napi::Number>().Uint32Value());
    const std::string kind = a.Get("kind").As<Napi::String>().Utf8Value();
    Napi::Value v = a.Get("value");
    bool lossless = true;
    if (kind == "u8") w.U8(type, static_cast<uint8_t>(v.As<Napi::Number>().Uint32Value()));
    else if (kind == "u16") w.U16(type, static_cast<uint16_t>(v.As<Napi::Number>().Uint32Value()));
    else if (kind == "u32") w.U32(type, v.As<Napi::Number>().Uint32Value());
    else if (kind == "u64") w.U64(type, v.As<Napi::BigInt>().Uint64Value(&lossless));
    else if (kind == "be16") w.Be16(type, static_cast<uint16_t>(v.As<Napi::Number>().Uint32Value()));
    else if (kind == "be32") w.Be32(type, v.As<Napi::Number>().Uint32Value());
    else if (kind == "be64") w.Be64(type, v.As<Napi::BigInt>().Uint64Value(&lossless));
    else if (kind == "str") w.Str(type, v.As<Napi::String>().Utf8Value());
    else if (kind == "flag") w.Flag(type);
    else if (kind == "bytes") {
      auto b = v.As<Napi::Buffer<uint8_t>>();
      w.Put(type, b.Data(), b.Length());
    } else if (kind == "nest") {
      size_t tok = w.Begin(type);
      WriteTree(env, w, a.Get("children").As<Napi::Array>());
      w.End(tok);
    } else {
      ThrowInvalid(env, "writeAttributes", "unknown kind " + kind);
    }
  }
}

Napi::Value WriteAttributes(const Napi::CallbackInfo& info) {
  if (!info[0].IsArray()) ThrowInvalid(info.Env(), "writeAttributes", "expected an array");
  std::vector<uint8_t> buf;
  nl::AttrWriter w(buf);
  WriteTree(info.Env(), w, info[0].As<Napi::Array>());
  return ToBuffer(info.Env(), buf);
}

// Parses a datagram of netlink messages: [{ type, flags, seq, pid, payload }].
Napi::Value ParseMessages(const Napi::CallbackInfo& info) {
  std::vector<uint8_t> buf = BufferArg(info, 0);
  Napi::Env env = info.Env();
  Napi::Array out = Napi::Array::New(env);
  uint32_t n = 0;
  const bool ok = nl::ForEachMessage(buf.data(), buf.size(), [&](const nlmsghdr* h) {
    Napi::Object m = Napi::Object::New(env);
    m.Set("type", h->nlmsg_type);
    m.Set("flags", h->nlmsg_flags);
    m.Set("seq", h->nlmsg_seq);
    m.Set("pid", h->nlmsg_pid);
    m.Set("payload", Napi::Buffer<uint8_t>::Copy(env, reinterpret_cast<const uint8_t*>(NLMSG_DATA(h)),
                                                 h->nlmsg_len - NLMSG_HDRLEN));
    if (h->nlmsg_type == NLMSG_ERROR) {
      nl::Status st;
      uint32_t seq = 0;
      if (!nl::ParseError(h, &st, &seq)) ThrowInvalid(env, "parseMessages", "malformed NLMSG_ERROR");
      m.Set("error", st.error);
      if (!st.extack.empty()) m.Set("extack", st.extack);
      if (st.extack_offset >= 0) m.Set("extackOffset", static_cast<double>(st.extack_offset));
    }
    out.Set(n++, m);
    return true;
  });
  if (!ok) ThrowInvalid(env, "parseMessages", "truncated or malformed netlink message");
  return out;
}

}  // namespace

void InitCodec(Napi::Env env, Napi::Object exports) {
  Napi::Object codec = Napi::Object::New(env);
  codec.Set("parseAttributes", Function<ParseAttributes>(env, "parseAttributes"));
  codec.Set("writeAttributes", Function<WriteAttributes>(env, "writeAttributes"));
  codec.Set("parseMessages", Function<ParseMessages>(env, "parseMessages"));
  exports.Set("codec", codec);
}

}  // namespace addon
