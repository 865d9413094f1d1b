import socket, sys, threading
name = sys.argv[1].encode()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080)); s.listen(512)
while True:
    c, a = s.accept()
    try: c.sendall(name + b" " + a[0].encode() + b"\n")
    finally: c.close()
