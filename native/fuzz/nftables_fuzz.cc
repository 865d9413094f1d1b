// libFuzzer harness for the nf_tables reply decoders (rules with their expressions, chains,
// sets, elements, tables, generation). Built by scripts/fuzz.sh; not part of the addon.
#include <cstddef>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>

#include "netlink/message.h"
#include "nftables/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte picks the message type so every decoder sees well-framed input often.
  if (size < 1) return 0;
  const uint8_t pick = data[0] % 6;
  static const uint16_t kTypes[] = {NFT_MSG_NEWRULE, NFT_MSG_NEWCHAIN, NFT_MSG_NEWSET,
                                    NFT_MSG_NEWSETELEM, NFT_MSG_NEWTABLE, NFT_MSG_NEWGEN};
  std::vector<uint8_t> buf(NLMSG_HDRLEN + (size - 1));
  nlmsghdr h{};
  h.nlmsg_len = static_cast<uint32_t>(buf.size());
  h.nlmsg_type = nft::MsgType(kTypes[pick]);
  std::memcpy(buf.data(), &h, sizeof h);
  std::memcpy(buf.data() + NLMSG_HDRLEN, data + 1, size - 1);
  const nlmsghdr* m = reinterpret_cast<const nlmsghdr*>(buf.data());
  std::string why;
  nft::Rule r;
  nft::Chain c;
  nft::Set s;
  nft::Table t;
  nft::ElementsRef ref;
  std::vector<nft::Element> elems;
  uint32_t gen = 0;
  switch (pick) {
    case 0: nft::DecodeRule(m, &r, &why); break;
    case 1: nft::DecodeChain(m, &c, &why); break;
    case 2: nft::DecodeSet(m, &s, &why); break;
    case 3: nft::DecodeElements(m, &ref, &elems, &why); break;
    case 4: nft::DecodeTable(m, &t, &why); break;
    default: nft::DecodeGen(m, &gen, &why); break;
  }
  // Anything decoded must re-encode without trouble (the listing -> commit round trip).
  if (pick == 0 && why.empty()) {
    nft::Op op;
    op.kind = nft::Kind::kRule;
    op.rule = r;
    op.rule.table = "t";
    op.rule.chain = "c";
    nft::TxBuilder tb(nft::TxOptions{});
    tb.Add(op, 0);
    tb.Finish();
  }
  return 0;
}
