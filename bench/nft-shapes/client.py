import socket, sys, collections
vip, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cnt = collections.Counter(); srcs = collections.Counter()
for i in range(n):
    s = socket.create_connection((vip, port), timeout=3)
    d = b""
    while True:
        x = s.recv(100)
        if not x: break
        d += x
    s.close()
    ep, src = d.decode().split()
    cnt[ep] += 1; srcs[src] += 1
print(vip, dict(sorted(cnt.items())), "seen-src:", dict(srcs))
