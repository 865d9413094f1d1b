// An independent reader and writer of addresses' IFA_PROTO (Linux 6.1+) for cross-checks:
// the iproute2 here (6.1) neither shows nor sets an address's protocol, so this speaks
// rtnetlink itself from Python's standard library (a raw AF_NETLINK socket and struct), sharing
// no code with the addon.
import { execFileSync } from 'node:child_process';

const SCRIPT = String.raw`
import ipaddress, json, socket, struct, sys

def request(s, typ, flags, body):
    s.send(struct.pack('=LHHLL', 16 + len(body), typ, flags, 1, 0) + body)

def attr(typ, val):
    n = 4 + len(val)
    return struct.pack('=HH', n, typ) + val + bytes((4 - n % 4) % 4)

s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
s.bind((0, 0))
if sys.argv[1] == 'dump':
    request(s, 22, 0x1 | 0x300, struct.pack('=BBBBI', 0, 0, 0, 0, 0))  # RTM_GETADDR, REQUEST|DUMP
    out, done = [], False
    while not done:
        data, off = s.recv(1 << 20), 0
        while off < len(data):
            ln, typ = struct.unpack_from('=LH', data, off)
            if typ == 3:
                done = True
                break
            if typ == 2:
                sys.exit('netlink error %d' % struct.unpack_from('=i', data, off + 16)[0])
            if typ == 20:
                fam, plen, _fl, _scope, idx = struct.unpack_from('=BBBBI', data, off + 16)
                a, attrs = off + 24, {}
                while a < off + ln:
                    alen, atype = struct.unpack_from('=HH', data, a)
                    attrs[atype & 0x3fff] = data[a + 4:a + alen]
                    a += (alen + 3) & ~3
                raw = attrs.get(2, attrs.get(1))
                addr = ipaddress.ip_address(bytes(raw))
                out.append({'index': idx, 'address': str(addr), 'prefixlen': plen, 'protocol': attrs[11][0] if 11 in attrs else 0})
            off += (ln + 3) & ~3
    print(json.dumps(out))
else:  # add INDEX ADDRESS/PREFIX PROTO
    index, cidr, proto = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    net = ipaddress.ip_interface(cidr)
    fam = 10 if net.version == 6 else 2
    body = struct.pack('=BBBBI', fam, net.network.prefixlen, 0, 0, index)
    body += attr(2, net.ip.packed) + attr(1, net.ip.packed) + attr(11, bytes([proto]))
    request(s, 20, 0x1 | 0x4 | 0x200 | 0x400, body)  # RTM_NEWADDR, REQUEST|ACK|EXCL|CREATE
    data = s.recv(65536)
    err = struct.unpack_from('=i', data, 16)[0]
    if err:
        sys.exit('RTM_NEWADDR: errno %d' % -err)
`;

export interface ProtoAddress {
  index: number;
  address: string;
  prefixlen: number;
  /** IFA_PROTO as the kernel dumps it (0: no attribute). */
  protocol: number;
}

const inNetns = (netns: string | undefined, args: string[]) => (netns ? ['ip', ['netns', 'exec', netns, ...args]] : [args[0]!, args.slice(1)]) as [string, string[]];

/** Every address of the namespace with its IFA_PROTO, from the kernel's RTM_GETADDR dump. */
export function protoAddresses(netns?: string): ProtoAddress[] {
  const [cmd, args] = inNetns(netns, ['python3', '-c', SCRIPT, 'dump']);
  return JSON.parse(execFileSync(cmd, args, { encoding: 'utf8' })) as ProtoAddress[];
}

/** Adds an address carrying `protocol` as another program would (RTM_NEWADDR with IFA_PROTO). */
export function addProtoAddress(index: number, cidr: string, protocol: number, netns?: string): void {
  const [cmd, args] = inNetns(netns, ['python3', '-c', SCRIPT, 'add', String(index), cidr, String(protocol)]);
  execFileSync(cmd, args, { encoding: 'utf8' });
}
