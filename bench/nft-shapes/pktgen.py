#!/usr/bin/env python3
# per-packet cost ruleset: NSVC services with 10 endpoints all in the LAST of K endpoint-count classes
import sys
shape, K, nsvc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def ip(x): return "%d.%d.%d.%d" % (x >> 24, (x >> 16) & 255, (x >> 8) & 255, x & 255)
C, E = (10 << 24) | (96 << 16), (10 << 24) | (128 << 16)
Ns = list(range(100, 100 + K - 1)) + [10]     # K classes, hot class (N=10) evaluated last
o = ["flush ruleset", "table ip kp {"]
for n in Ns:
    o.append(" map ep%d { typeof ip daddr . meta l4proto . th dport . numgen random mod %d : ip daddr . th dport; }" % (n, n))
if shape == "C2":
    o.append(" chain out { type nat hook output priority -100; policy accept;")
    for n in Ns: o.append("  meta l4proto { tcp, udp, sctp } dnat ip to ip daddr . meta l4proto . th dport . numgen random mod %d map @ep%d" % (n, n))
    o.append(" }")
elif shape == "E":
    o.append(" map svc2n { typeof ip daddr . meta l4proto . th dport : meta mark; }")
    for n in Ns: o.append(" chain lb%d { meta l4proto { tcp, udp, sctp } dnat ip to ip daddr . meta l4proto . th dport . numgen random mod %d map @ep%d; }" % (n, n, n))
    o.append(" map nv { type mark : verdict; elements = { %s } }" % ", ".join("%d : goto lb%d" % (n, n) for n in Ns))
    o.append(" chain out { type nat hook output priority -100; policy accept; }")
elif shape == "B":
    o = ["flush ruleset", "table ip kp {", " map svc { typeof ip daddr . meta l4proto . th dport . numgen random mod 65536 : ip daddr . th dport; flags interval; }",
         " chain out { type nat hook output priority -100; policy accept;",
         "  meta l4proto { tcp, udp, sctp } dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 65536 map @svc", " }"]
elif shape == "none":
    o.append(" chain out { type nat hook output priority -100; policy accept; }")
o.append("}")
if shape == "B":
    b = [65536 * k // 10 for k in range(11)]
    for c in range(0, nsvc, 50):
        el = []
        for s in range(c, min(nsvc, c + 50)):
            el += ["%s . udp . 80 . %d-%d : %s . 8080" % (ip(C + 1 + s), b[k], b[k + 1] - 1, ip(E + 1 + s * 16 + k)) for k in range(10)]
        o.append("add element ip kp svc { %s }" % ", ".join(el))
elif shape != "none":
    for c in range(0, nsvc, 1000):
        el = []
        for s in range(c, min(nsvc, c + 1000)):
            el += ["%s . udp . 80 . %d : %s . 8080" % (ip(C + 1 + s), k, ip(E + 1 + s * 16 + k)) for k in range(10)]
        o.append("add element ip kp ep10 { %s }" % ", ".join(el))
        if shape == "E":
            o.append("add element ip kp svc2n { %s }" % ", ".join("%s . udp . 80 : 10" % ip(C + 1 + s) for s in range(c, min(nsvc, c + 1000))))
print("\n".join(o))
