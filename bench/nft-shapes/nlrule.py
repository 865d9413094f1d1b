#!/usr/bin/env python3
"""Append shape-E dispatch rule over raw netlink (nft 1.0.6 cannot express a map result as a vmap key):
   [payload ip daddr -> r1][meta l4proto -> r9][payload th dport -> r10]
   [lookup @SVC2N sreg r1 dreg r1]        svc tuple -> N (data map, no validation on element updates)
   [lookup @NV sreg r1 dreg verdict]      N -> goto lbN (small vmap)
usage: nlrule.py TABLE CHAIN SVC2N NV   (family ip)"""
import socket, struct, sys, os
table, chain, svc2n, nv = sys.argv[1:5]
nodeport = len(sys.argv) > 5 and sys.argv[5] == "np"
NFNL_SUBSYS_NFTABLES = 10
NFT_MSG_NEWRULE = 6
NLM_F_REQUEST, NLM_F_ACK, NLM_F_CREATE, NLM_F_APPEND = 1, 4, 0x400, 0x800
NLA_F_NESTED = 0x8000
def attr(t, payload):
    l = 4 + len(payload)
    return struct.pack("=HH", l, t) + payload + b"\0" * ((4 - l % 4) % 4)
def s(t, v): return attr(t, v.encode() + b"\0")
def u32(t, v): return attr(t, struct.pack(">I", v))
def nest(t, *a): return attr(t | NLA_F_NESTED, b"".join(a))
def expr(name, *a): return nest(1, s(1, name), nest(2, *a))          # NFTA_LIST_ELEM{NFTA_EXPR_NAME, NFTA_EXPR_DATA}
def payload(dreg, base, off, ln): return expr("payload", u32(1, dreg), u32(2, base), u32(3, off), u32(4, ln))
def meta(dreg, key): return expr("meta", u32(1, dreg), u32(2, key))
def lookup(setname, sreg, dreg=None):
    a = [s(1, setname), u32(2, sreg)]
    if dreg is not None: a.append(u32(3, dreg))
    return expr("lookup", *a)
if nodeport:  # key: meta l4proto . th dport
    exprs = meta(1, 16) + payload(9, 2, 2, 2) + lookup(svc2n, 1, 1) + lookup(nv, 1, 0)
else:         # key: ip daddr . meta l4proto . th dport
    exprs = payload(1, 1, 16, 4) + meta(9, 16) + payload(10, 2, 2, 2) + lookup(svc2n, 1, 1) + lookup(nv, 1, 0)
body = s(1, table) + s(2, chain) + nest(4, exprs)
def msg(typ, flags, seq, fam, resid, payload=b""):
    p = struct.pack("=BBH", fam, 0, socket.htons(resid)) + payload
    return struct.pack("=IHHII", 16 + len(p), typ, flags, seq, 0) + p
seq = 1000
batch = msg(0x10, NLM_F_REQUEST, seq, 0, NFNL_SUBSYS_NFTABLES)
batch += msg((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_APPEND, seq + 1, socket.AF_INET, 0, body)
batch += msg(0x11, NLM_F_REQUEST, seq + 2, 0, NFNL_SUBSYS_NFTABLES)
sk = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
sk.bind((0, 0)); sk.send(batch)
d = sk.recv(65536)
ln, typ, fl, sq, pid = struct.unpack("=IHHII", d[:16])
err = struct.unpack("=i", d[16:20])[0] if typ == 2 else None
if err: print("netlink error", err, os.strerror(-err)); sys.exit(1)
print("ok")
