// libFuzzer harness for the IPVS reply decoders (services, destinations, daemons, config, info)
// and for the request encoder fed with decoded structs. Built and run by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ipvs/codec.h"
#include "netlink/message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nl::ForEachMessage(data, size, [](const nlmsghdr* h) {
    std::string why;
    ipvs::Service s;
    if (ipvs::DecodeService(h, &s, &why)) {
      // Whatever decodes must re-encode without tripping the sanitizers.
      nl::Batch b;
      ipvs::Op op;
      op.kind = ipvs::OpKind::kAddService;
      op.svc = s;
      if (ipvs::Validate(op, &why)) ipvs::EncodeOp(b, 0x1c, op);
      ipvs::EncodeGetDests(b, 0x1c, s.key);
      (void)ipvs::DescribeService(s.key);
    }
    ipvs::Dest d;
    if (ipvs::DecodeDest(h, &d, &why)) {
      nl::Batch b;
      ipvs::Op op;
      op.kind = ipvs::OpKind::kUpdateDest;
      op.dest = d;
      if (ipvs::Validate(op, &why)) ipvs::EncodeOp(b, 0x1c, op);
      (void)ipvs::DescribeDest(op.svc.key, d);
    }
    ipvs::Daemon dm;
    ipvs::DecodeDaemon(h, &dm, &why);
    ipvs::Timeouts t;
    ipvs::DecodeConfig(h, &t, &why);
    ipvs::Info info;
    ipvs::DecodeInfo(h, &info, &why);
    return true;
  });
  return 0;
}
