#!/usr/bin/env python3
"""Generate nft rulesets for candidate kube-proxy-like shapes.
usage: gen.py SHAPE NSVC NEP OUTDIR
writes OUTDIR/full.nft, OUTDIR/fwd.nft, OUTDIR/back.nft (endpoint change of one service, and its revert),
       OUTDIR/addsvc.nft / delsvc.nft (add / delete one new service)
"""
import sys, os
shape, nsvc, nep, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
os.makedirs(out, exist_ok=True)
M = 65536
def ip(base, n): return "%d.%d.%d.%d" % (base >> 24, (base >> 16) & 255, (base >> 8) & 255, base & 255) if n is None else ip(base + n, None)
CIP = (10 << 24) | (96 << 16)           # 10.96.0.0/12 service range
EPB = (10 << 24) | (128 << 16)          # 10.128.0.0/9 pod range
def cip(s): return ip(CIP + 1 + s, None)
def eip(s, j): return ip(EPB + 1 + s * 16 + j, None)
ALT = (10 << 24) | (200 << 16)
def alt(j): return ip(ALT + 1 + j, None)   # replacement endpoint IPs
def ranges(n):
    b = [M * k // n for k in range(n + 1)]
    return [(b[k], b[k + 1] - 1) for k in range(n)]
def eps(s, n, alts=False):
    return [alt(j) if (alts and j == 0) else eip(s, j) for j in range(n)]

hdr = ""
def w(name, txt):
    with open(os.path.join(out, name), "w") as f: f.write(txt)

if shape == "B":   # pipapo: one rule, all data in one concatenated interval map
    T = "table ip kp {\n"
    T += " map svc { typeof ip daddr . meta l4proto . th dport . numgen random mod 65536 : ip daddr . th dport; flags interval; }\n"
    T += " chain pre { type nat hook prerouting priority dstnat; policy accept;\n  meta l4proto { tcp, udp, sctp } dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 65536 map @svc\n }\n"
    T += " chain out { type nat hook output priority -100; policy accept;\n  meta l4proto { tcp, udp, sctp } dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 65536 map @svc\n }\n}\n"
    def elems(s, e): return ", ".join("%s . tcp . 80 . %d-%d : %s . 8080" % (cip(s), lo, hi, a) for (lo, hi), a in zip(ranges(len(e)), e))
    def keys(s, n): return ", ".join("%s . tcp . 80 . %d-%d" % (cip(s), lo, hi) for lo, hi in ranges(n))
    with open(os.path.join(out, "full.nft"), "w") as f:
        f.write("flush ruleset\n" + T)
        CH = 50   # >~960 elements in one add-element command fails with EINVAL (nft 1.0.6)
        for c in range(0, nsvc, CH):
            f.write("add element ip kp svc { %s }\n" % ", ".join(elems(s, eps(s, nep)) for s in range(c, min(nsvc, c + CH))))
    s = nsvc // 2
    w("fwd.nft", "delete element ip kp svc { %s }\nadd element ip kp svc { %s }\n" % (keys(s, nep), elems(s, eps(s, nep, True))))
    w("back.nft", "delete element ip kp svc { %s }\nadd element ip kp svc { %s }\n" % (keys(s, nep), elems(s, eps(s, nep))))
    w("addsvc.nft", "add element ip kp svc { %s }\n" % elems(nsvc + 1, eps(nsvc + 1, nep)))
    w("delsvc.nft", "delete element ip kp svc { %s }\n" % keys(nsvc + 1, nep))

elif shape in ("C", "C2"):  # hash maps. C2: one rule per distinct endpoint count N, map epN keyed tuple . bucket
    # C: vmap svc -> goto lbN chain (validation!), C2: linear rules per N (no verdict maps)
    Ns = sorted(set([nep, nep + 1]))
    T = "table ip kp {\n"
    for n in Ns:
        T += " map ep%d { typeof ip daddr . meta l4proto . th dport . numgen random mod %d : ip daddr . th dport; }\n" % (n, n)
    if shape == "C":
        T += " map svc { typeof ip daddr . meta l4proto . th dport : verdict; }\n"
        for n in Ns:
            T += " chain lb%d {\n  dnat ip to ip daddr . meta l4proto . th dport . numgen random mod %d map @ep%d\n }\n" % (n, n, n)
        body = "  meta l4proto { tcp, udp, sctp } ip daddr . meta l4proto . th dport vmap @svc\n"
    else:
        body = "".join("  meta l4proto { tcp, udp, sctp } dnat ip to ip daddr . meta l4proto . th dport . numgen random mod %d map @ep%d\n" % (n, n) for n in Ns)
    T += " chain pre { type nat hook prerouting priority dstnat; policy accept;\n" + body + " }\n"
    T += " chain out { type nat hook output priority -100; policy accept;\n" + body + " }\n}\n"
    def elems(s, e): return ", ".join("%s . tcp . 80 . %d : %s . 8080" % (cip(s), k, a) for k, a in enumerate(e))
    def keys(s, n): return ", ".join("%s . tcp . 80 . %d" % (cip(s), k) for k in range(n))
    with open(os.path.join(out, "full.nft"), "w") as f:
        f.write("flush ruleset\n" + T)
        CH = 2000
        for c in range(0, nsvc, CH):
            f.write("add element ip kp ep%d { %s }\n" % (nep, ", ".join(elems(s, eps(s, nep)) for s in range(c, min(nsvc, c + CH)))))
            if shape == "C":
                f.write("add element ip kp svc { %s }\n" % ", ".join("%s . tcp . 80 : goto lb%d" % (cip(s), nep) for s in range(c, min(nsvc, c + CH))))
    s = nsvc // 2
    # endpoint replace inside same N (hash: just overwrite data? elements must be deleted+added)
    w("fwd.nft", "delete element ip kp ep%d { %s }\nadd element ip kp ep%d { %s }\n" % (nep, keys(s, nep), nep, elems(s, eps(s, nep, True))))
    w("back.nft", "delete element ip kp ep%d { %s }\nadd element ip kp ep%d { %s }\n" % (nep, keys(s, nep), nep, elems(s, eps(s, nep))))
    # scale up: N -> N+1 endpoints (moves service between maps)
    up = "delete element ip kp ep%d { %s }\nadd element ip kp ep%d { %s }\n" % (nep, keys(s, nep), nep + 1, elems(s, eps(s, nep + 1)))
    down = "delete element ip kp ep%d { %s }\nadd element ip kp ep%d { %s }\n" % (nep + 1, keys(s, nep + 1), nep, elems(s, eps(s, nep)))
    if shape == "C":
        up += "delete element ip kp svc { %s . tcp . 80 }\nadd element ip kp svc { %s . tcp . 80 : goto lb%d }\n" % (cip(s), cip(s), nep + 1)
        down += "delete element ip kp svc { %s . tcp . 80 }\nadd element ip kp svc { %s . tcp . 80 : goto lb%d }\n" % (cip(s), cip(s), nep)
    w("up.nft", up); w("down.nft", down)
    a = nsvc + 1
    add = "add element ip kp ep%d { %s }\n" % (nep, elems(a, eps(a, nep)))
    dl = "delete element ip kp ep%d { %s }\n" % (nep, keys(a, nep))
    if shape == "C":
        add += "add element ip kp svc { %s . tcp . 80 : goto lb%d }\n" % (cip(a), nep)
        dl += "delete element ip kp svc { %s . tcp . 80 }\n" % cip(a)
    w("addsvc.nft", add); w("delsvc.nft", dl)

elif shape == "E":  # hash maps; svc tuple -> N (data map), N -> goto lbN (small vmap); needs raw-netlink rule (nlrule.py)
    Ns = sorted(set([nep, nep + 1]))
    T = "table ip kp {\n"
    T += " map svc2n { typeof ip daddr . meta l4proto . th dport : meta mark; }\n"
    for n in Ns:
        T += " map ep%d { typeof ip daddr . meta l4proto . th dport . numgen random mod %d : ip daddr . th dport; }\n" % (n, n)
        T += " chain lb%d {\n  meta l4proto { tcp, udp, sctp } dnat ip to ip daddr . meta l4proto . th dport . numgen random mod %d map @ep%d\n }\n" % (n, n, n)
    T += " map nv { type mark : verdict; elements = { %s } }\n" % ", ".join("%d : goto lb%d" % (n, n) for n in Ns)
    T += " chain pre { type nat hook prerouting priority dstnat; policy accept; }\n"
    T += " chain out { type nat hook output priority -100; policy accept; }\n}\n"
    def elems(s, e): return ", ".join("%s . tcp . 80 . %d : %s . 8080" % (cip(s), k, a) for k, a in enumerate(e))
    def keys(s, n): return ", ".join("%s . tcp . 80 . %d" % (cip(s), k) for k in range(n))
    with open(os.path.join(out, "full.nft"), "w") as f:
        f.write("flush ruleset\n" + T)
        CH = 2000
        for c in range(0, nsvc, CH):
            f.write("add element ip kp ep%d { %s }\n" % (nep, ", ".join(elems(s, eps(s, nep)) for s in range(c, min(nsvc, c + CH)))))
            f.write("add element ip kp svc2n { %s }\n" % ", ".join("%s . tcp . 80 : %d" % (cip(s), nep) for s in range(c, min(nsvc, c + CH))))
    w("post.sh", "python3 /work/research/nft-shape/nlrule.py kp pre svc2n nv >/dev/null && python3 /work/research/nft-shape/nlrule.py kp out svc2n nv >/dev/null\n")
    s = nsvc // 2
    w("fwd.nft", "delete element ip kp ep%d { %s }\nadd element ip kp ep%d { %s }\n" % (nep, keys(s, nep), nep, elems(s, eps(s, nep, True))))
    w("back.nft", "delete element ip kp ep%d { %s }\nadd element ip kp ep%d { %s }\n" % (nep, keys(s, nep), nep, elems(s, eps(s, nep))))
    up = "delete element ip kp ep%d { %s }\nadd element ip kp ep%d { %s }\n" % (nep, keys(s, nep), nep + 1, elems(s, eps(s, nep + 1)))
    up += "delete element ip kp svc2n { %s . tcp . 80 }\nadd element ip kp svc2n { %s . tcp . 80 : %d }\n" % (cip(s), cip(s), nep + 1)
    down = "delete element ip kp ep%d { %s }\nadd element ip kp ep%d { %s }\n" % (nep + 1, keys(s, nep + 1), nep, elems(s, eps(s, nep)))
    down += "delete element ip kp svc2n { %s . tcp . 80 }\nadd element ip kp svc2n { %s . tcp . 80 : %d }\n" % (cip(s), cip(s), nep)
    w("up.nft", up); w("down.nft", down)
    a = nsvc + 1
    w("addsvc.nft", "add element ip kp ep%d { %s }\nadd element ip kp svc2n { %s . tcp . 80 : %d }\n" % (nep, elems(a, eps(a, nep)), cip(a), nep))
    w("delsvc.nft", "delete element ip kp ep%d { %s }\ndelete element ip kp svc2n { %s . tcp . 80 }\n" % (nep, keys(a, nep), cip(a)))
    # a brand-new endpoint count (new lb chain + nv element): the only op that triggers validation
    w("newn.nft", "add map ip kp ep77 { typeof ip daddr . meta l4proto . th dport . numgen random mod 77 : ip daddr . th dport; }\nadd chain ip kp lb77\nadd rule ip kp lb77 meta l4proto { tcp, udp, sctp } dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 77 map @ep77\nadd element ip kp nv { 77 : goto lb77 }\n")
    w("delnewn.nft", "delete element ip kp nv { 77 }\nflush chain ip kp lb77\ndelete chain ip kp lb77\ndelete map ip kp ep77\n")
elif shape == "D":  # per-service chain with dnat numgen anonymous map, service vmap -> goto
    T = "table ip kp {\n map svc { type ipv4_addr . inet_proto . inet_service : verdict; }\n"
    body = "  ip daddr . meta l4proto . th dport vmap @svc\n"
    T += " chain pre { type nat hook prerouting priority dstnat; policy accept;\n" + body + " }\n"
    T += " chain out { type nat hook output priority -100; policy accept;\n" + body + " }\n}\n"
    def rule(s, e):
        return "dnat ip to numgen random mod %d map { %s }" % (len(e), ", ".join("%d : %s . 8080" % (k, a) for k, a in enumerate(e)))
    with open(os.path.join(out, "full.nft"), "w") as f:
        f.write("flush ruleset\n" + T)
        for s in range(nsvc):
            f.write("add chain ip kp svc%d\nadd rule ip kp svc%d meta l4proto tcp %s\n" % (s, s, rule(s, eps(s, nep))))
        CH = 2000
        for c in range(0, nsvc, CH):
            f.write("add element ip kp svc { %s }\n" % ", ".join("%s . tcp . 80 : goto svc%d" % (cip(s), s) for s in range(c, min(nsvc, c + CH))))
    s = nsvc // 2
    w("fwd.nft", "flush chain ip kp svc%d\nadd rule ip kp svc%d meta l4proto tcp %s\n" % (s, s, rule(s, eps(s, nep, True))))
    w("back.nft", "flush chain ip kp svc%d\nadd rule ip kp svc%d meta l4proto tcp %s\n" % (s, s, rule(s, eps(s, nep))))
    a = nsvc + 1
    w("addsvc.nft", "add chain ip kp svc%d\nadd rule ip kp svc%d meta l4proto tcp %s\nadd element ip kp svc { %s . tcp . 80 : goto svc%d }\n" % (a, a, rule(a, eps(a, nep)), cip(a), a))
    w("delsvc.nft", "delete element ip kp svc { %s . tcp . 80 }\ndelete chain ip kp svc%d\n" % (cip(a), a))

elif shape == "A":  # kube-proxy nftables mode-like
    T = "table ip kp {\n map service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }\n"
    T += " chain mark-for-masquerade {\n  meta mark set meta mark or 0x4000\n }\n"
    T += " chain masquerading { type nat hook postrouting priority srcnat; policy accept;\n  meta mark & 0x4000 == 0 return\n  meta mark set meta mark xor 0x4000\n  masquerade fully-random\n }\n"
    T += " chain services {\n  ip daddr . meta l4proto . th dport vmap @service-ips\n }\n"
    T += " chain pre { type nat hook prerouting priority dstnat; policy accept;\n  jump services\n }\n"
    T += " chain out { type nat hook output priority -100; policy accept;\n  jump services\n }\n}\n"
    def svc_chain(s, e, tag):
        t = "add chain ip kp svc%d\n" % s
        for j, a in enumerate(e):
            t += "add chain ip kp ep%d-%s%d\nadd rule ip kp ep%d-%s%d ip saddr %s jump mark-for-masquerade\nadd rule ip kp ep%d-%s%d meta l4proto tcp dnat to %s:8080\n" % (s, tag, j, s, tag, j, a, s, tag, j, a)
        t += "add rule ip kp svc%d ip daddr %s tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade\n" % (s, cip(s))
        t += "add rule ip kp svc%d numgen random mod %d vmap { %s }\n" % (s, len(e), ", ".join("%d : goto ep%d-%s%d" % (j, s, tag, j) for j in range(len(e))))
        return t
    with open(os.path.join(out, "full.nft"), "w") as f:
        f.write("flush ruleset\n" + T)
        for s in range(nsvc): f.write(svc_chain(s, eps(s, nep), "a"))
        CH = 2000
        for c in range(0, nsvc, CH):
            f.write("add element ip kp service-ips { %s }\n" % ", ".join("%s . tcp . 80 : goto svc%d" % (cip(s), s) for s in range(c, min(nsvc, c + CH))))
    s = nsvc // 2
    # endpoint change: new endpoint chain for ep0 (tag b), rewrite service chain, delete old endpoint chain
    def swap(newtag, oldtag, newip):
        t = "add chain ip kp ep%d-%s0\nadd rule ip kp ep%d-%s0 ip saddr %s jump mark-for-masquerade\nadd rule ip kp ep%d-%s0 meta l4proto tcp dnat to %s:8080\n" % (s, newtag, s, newtag, newip, s, newtag, newip)
        t += "flush chain ip kp svc%d\n" % s
        t += "add rule ip kp svc%d ip daddr %s tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade\n" % (s, cip(s))
        t += "add rule ip kp svc%d numgen random mod %d vmap { %s }\n" % (s, nep, ", ".join("%d : goto ep%d-%s%d" % (j, s, newtag if j == 0 else "a", j) for j in range(nep)))
        t += "flush chain ip kp ep%d-%s0\ndelete chain ip kp ep%d-%s0\n" % (s, oldtag, s, oldtag)
        return t
    w("fwd.nft", swap("b", "a", alt(0)))
    w("back.nft", swap("a", "b", eip(s, 0)))
    a = nsvc + 1
    w("addsvc.nft", svc_chain(a, eps(a, nep), "a") + "add element ip kp service-ips { %s . tcp . 80 : goto svc%d }\n" % (cip(a), a))
    dl = "delete element ip kp service-ips { %s . tcp . 80 }\nflush chain ip kp svc%d\ndelete chain ip kp svc%d\n" % (cip(a), a, a)
    for j in range(nep): dl += "flush chain ip kp ep%d-a%d\ndelete chain ip kp ep%d-a%d\n" % (a, j, a, j)
    w("delsvc.nft", dl)
