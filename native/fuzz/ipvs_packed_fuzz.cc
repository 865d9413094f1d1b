// libFuzzer harness for the packed form of IPVS ops (ipvs/packed.h): arbitrary bytes through the
// decoder, every decoded op through ParseOp (op_parse.h) and, when it is valid, the request
// encoder. Built and run by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ipvs/codec.h"
#include "ipvs/op_parse.h"
#include "ipvs/packed.h"
#include "netlink/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ipvs::PackedOps packed;
  std::string why;
  if (!packed.Decode(data, size, &why)) return 0;
  ipvs::ServiceMemo<ipvs::PackedValue> memo;
  nl::Batch b;
  for (size_t i = 0; i < packed.size(); i++) {
    try {
      const ipvs::Op op = ipvs::ParseOp(packed.op(i), &memo);
      ipvs::EncodeOp(b, 0x1c, op);
    } catch (const ipvs::Problem& p) {
      (void)ipvs::OpNameOf(packed.op(i));
    }
  }
  b.Seal();
  return 0;
}
