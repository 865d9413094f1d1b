// kube-proxy's IPVS-mode ipsets (same names, types and members), for clusters whose iptables
// rules still reference them. Built from the same GlueSpec as the nftables glue.
import type { DesiredIpSet } from '../../engine/ipsets-diff.js';
import type { IpSetMember, IpSetType } from '../../kernel/ipsets.js';
import type { GlueSpec } from './types.js';
import { familyOf } from '../../net/address.js';
import { compareText } from '../../util/sorted.js';

/** Sets named with this prefix are owned in kube-proxy ipset mode. */
export const KUBE_IPSET_PREFIX = 'KUBE-';

type Fam = 'inet' | 'inet6';

function name(base: string, fam: Fam): string {
  // kube-proxy names its IPv6 sets KUBE-6-…, cut to ipset's 31 characters as its NewIPSet does
  // (KUBE-6-LOAD-BALANCER-SOURCE-CIDR becomes KUBE-6-LOAD-BALANCER-SOURCE-CID).
  return fam === 'inet6' ? base.replace(/^KUBE-/, 'KUBE-6-').slice(0, 31) : base;
}

function set(base: string, type: IpSetType, fam: Fam, members: IpSetMember[]): DesiredIpSet {
  const dedup = new Map(members.map((m) => [JSON.stringify(m), m]));
  const members2 = [...dedup].sort(([a], [b]) => compareText(a, b)).map(([, m]) => m);
  if (type === 'bitmap:port') return { name: name(base, fam), type, range: { from: 0, to: 65535 }, members: members2 };
  return { name: name(base, fam), type, family: fam, members: members2 };
}

export function kubeProxyIpSets(g: GlueSpec): DesiredIpSet[] {
  const out: DesiredIpSet[] = [];
  for (const fam of ['inet', 'inet6'] as const) {
    const mine = (a: string) => familyOf(a) === fam;
    const vips = g.vips.filter((v) => mine(v.address));
    const ipPort = (v: { address: string; protocol: 'tcp' | 'udp' | 'sctp'; port: number }): IpSetMember => ({ ip: v.address, proto: v.protocol, port: v.port });
    out.push(set('KUBE-CLUSTER-IP', 'hash:ip,port', fam, vips.filter((v) => v.kind === 'clusterIP').map(ipPort)));
    // as kube-proxy: an externalTrafficPolicy Local one is in -LOCAL only (not masqueraded)
    out.push(set('KUBE-EXTERNAL-IP', 'hash:ip,port', fam, vips.filter((v) => v.kind === 'externalIP' && !v.localOnly).map(ipPort)));
    out.push(set('KUBE-EXTERNAL-IP-LOCAL', 'hash:ip,port', fam, vips.filter((v) => v.kind === 'externalIP' && v.localOnly).map(ipPort)));
    out.push(set('KUBE-LOAD-BALANCER', 'hash:ip,port', fam, vips.filter((v) => v.kind === 'loadBalancer').map(ipPort)));
    out.push(set('KUBE-LOAD-BALANCER-LOCAL', 'hash:ip,port', fam, vips.filter((v) => v.kind === 'loadBalancer' && v.localOnly).map(ipPort)));
    const ranges = g.sourceRanges.filter((r) => mine(r.address));
    out.push(set('KUBE-LOAD-BALANCER-FW', 'hash:ip,port', fam, ranges.map(ipPort)));
    out.push(
      set('KUBE-LOAD-BALANCER-SOURCE-CIDR', 'hash:ip,port,net', fam, ranges.flatMap((r) =>
        r.cidrs.filter(mine).map((c) => {
          const [ip2, len] = c.split('/');
          return { ...ipPort(r), ip2: ip2!, cidr2: len === undefined ? (fam === 'inet6' ? 128 : 32) : Number(len) };
        }),
      )),
    );
    out.push(set('KUBE-LOAD-BALANCER-SOURCE-IP', 'hash:ip,port,ip', fam, ranges.filter((r) => r.allowFromNode).map((r) => ({ ...ipPort(r), ip2: r.address }))));
    out.push(set('KUBE-LOOP-BACK', 'hash:ip,port,ip', fam, g.hairpin.filter((h) => mine(h.address)).map((h) => ({ ...ipPort(h), ip2: h.address }))));
    out.push(set('KUBE-IPVS-IPS', 'hash:ip', fam, vips.filter((v) => v.bound).map((v) => ({ ip: v.address }))));
    const nodePorts = g.nodePorts.filter((n) => n.family === fam);
    out.push(set('KUBE-NODE-PORT-SCTP-HASH', 'hash:ip,port', fam, nodePorts.filter((n) => n.protocol === 'sctp').flatMap((n) =>
      g.nodePortAddresses.filter(mine).map((ip) => ({ ip, proto: 'sctp' as const, port: n.port })))));
    out.push(set('KUBE-NODE-PORT-LOCAL-SCTP-HASH', 'hash:ip,port', fam, nodePorts.filter((n) => n.protocol === 'sctp' && n.localOnly).flatMap((n) =>
      g.nodePortAddresses.filter(mine).map((ip) => ({ ip, proto: 'sctp' as const, port: n.port })))));
  }
  // Port bitmaps have no family: one set each.
  const ports = (proto: string, local: boolean) =>
    g.nodePorts.filter((n) => n.protocol === proto && (!local || n.localOnly)).map((n) => ({ port: n.port }));
  out.push(set('KUBE-NODE-PORT-TCP', 'bitmap:port', 'inet', ports('tcp', false)));
  out.push(set('KUBE-NODE-PORT-LOCAL-TCP', 'bitmap:port', 'inet', ports('tcp', true)));
  out.push(set('KUBE-NODE-PORT-UDP', 'bitmap:port', 'inet', ports('udp', false)));
  out.push(set('KUBE-NODE-PORT-LOCAL-UDP', 'bitmap:port', 'inet', ports('udp', true)));
  out.push(set('KUBE-HEALTH-CHECK-NODE-PORT', 'bitmap:port', 'inet', g.healthCheckNodePorts.map((port) => ({ port }))));
  return out;
}
