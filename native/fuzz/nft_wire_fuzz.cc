// libFuzzer harness for the nftables op stream decoder (nftables/wire.h): any byte string either
// lays out batches or throws a kInvalid nl::Exception — never a crash, never an overread.
// Built by scripts/fuzz.sh; not part of the addon.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "netlink/error.h"
#include "nftables/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The magic is prepended so the fuzzer spends its time inside the ops.
  std::vector<uint8_t> buf(4 + size);
  const uint32_t magic = nft::kWireMagic;
  std::memcpy(buf.data(), &magic, 4);
  if (size) std::memcpy(buf.data() + 4, data, size);
  nft::TxOptions opt;
  opt.max_weight = size % 7;
  opt.ack_mode = static_cast<nft::AckMode>(size % 3);
  try {
    std::vector<size_t> offsets;
    std::vector<nft::TxBatch> txs = nft::BuildTransactionsFromWire(buf.data(), buf.size(), opt, &offsets);
    for (size_t i = 0; i < offsets.size(); i++) nft::WireOpAt(buf.data(), buf.size(), offsets[i], i);
  } catch (const nl::Exception& e) {
    if (e.error().kind != nl::ErrorKind::kInvalid) __builtin_trap();
  }
  return 0;
}
