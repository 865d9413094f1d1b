// kube-proxy IPVS mode's data plane for a workload, as input for its tools' batch modes:
// `ipvsadm -R` (a virtual server per ClusterIP:port and per node IP:NodePort, rr, masquerade
// destinations of weight 1), `ipset restore` (its sets: KUBE-CLUSTER-IP hash:ip,port,
// KUBE-LOOP-BACK hash:ip,port,ip per endpoint, KUBE-NODE-PORT-TCP bitmap:port, KUBE-IPVS-IPS
// hash:ip, and the other sets it always creates, empty), and `ip -batch` for the VIPs on
// kube-ipvs0 (kube-proxy binds them over netlink itself; listed as a separate peer step).
import { NODE_IP, type BenchService } from './workload.js';

export function ipvsadmRestore(services: readonly BenchService[], nodeIp = NODE_IP): { text: string; virtualServers: number; destinations: number } {
  const lines: string[] = [];
  let vs = 0;
  let dests = 0;
  const add = (vip: string, s: BenchService) => {
    lines.push(`-A -t ${vip} -s rr`);
    vs++;
    for (const e of s.endpoints) {
      lines.push(`-a -t ${vip} -r ${e.ip}:${e.port} -m -w 1`);
      dests++;
    }
  };
  for (const s of services) {
    add(`${s.clusterIP}:${s.port}`, s);
    if (s.nodePort !== undefined) add(`${nodeIp}:${s.nodePort}`, s);
  }
  return { text: lines.join('\n') + '\n', virtualServers: vs, destinations: dests };
}

/** Generous maxelem: kube-proxy's default 65536 does not hold KUBE-LOOP-BACK past 6.5k × 10. */
const MAXELEM = 1 << 20;

export function ipsetRestore(services: readonly BenchService[]): { text: string; members: number } {
  const hash = (name: string, type: string) => `create ${name} ${type} family inet hashsize 1024 maxelem ${MAXELEM}`;
  const lines = [
    hash('KUBE-CLUSTER-IP', 'hash:ip,port'),
    hash('KUBE-LOOP-BACK', 'hash:ip,port,ip'),
    hash('KUBE-IPVS-IPS', 'hash:ip'),
    hash('KUBE-EXTERNAL-IP', 'hash:ip,port'),
    hash('KUBE-EXTERNAL-IP-LOCAL', 'hash:ip,port'),
    hash('KUBE-LOAD-BALANCER', 'hash:ip,port'),
    hash('KUBE-LOAD-BALANCER-LOCAL', 'hash:ip,port'),
    hash('KUBE-LOAD-BALANCER-FW', 'hash:ip,port'),
    hash('KUBE-LOAD-BALANCER-SOURCE-IP', 'hash:ip,port,ip'),
    hash('KUBE-LOAD-BALANCER-SOURCE-CIDR', 'hash:ip,port,net'),
    hash('KUBE-NODE-PORT-SCTP-HASH', 'hash:ip,port'),
    hash('KUBE-NODE-PORT-LOCAL-SCTP-HASH', 'hash:ip,port'),
    'create KUBE-NODE-PORT-TCP bitmap:port range 0-65535',
    'create KUBE-NODE-PORT-LOCAL-TCP bitmap:port range 0-65535',
    'create KUBE-NODE-PORT-UDP bitmap:port range 0-65535',
    'create KUBE-NODE-PORT-LOCAL-UDP bitmap:port range 0-65535',
    'create KUBE-HEALTH-CHECK-NODE-PORT bitmap:port range 0-65535',
  ];
  let members = 0;
  for (const s of services) {
    lines.push(`add KUBE-CLUSTER-IP ${s.clusterIP},${s.protocol}:${s.port}`, `add KUBE-IPVS-IPS ${s.clusterIP}`);
    members += 2;
    if (s.nodePort !== undefined) {
      lines.push(`add KUBE-NODE-PORT-TCP ${s.nodePort}`);
      members++;
    }
    for (const e of s.endpoints) {
      lines.push(`add KUBE-LOOP-BACK ${e.ip},${s.protocol}:${e.port},${e.ip}`);
      members++;
    }
  }
  return { text: lines.join('\n') + '\n', members };
}

/** Every ipset name ipsetRestore creates (to destroy them between runs). */
export const IPSET_NAMES = [
  'KUBE-CLUSTER-IP', 'KUBE-LOOP-BACK', 'KUBE-IPVS-IPS', 'KUBE-EXTERNAL-IP', 'KUBE-EXTERNAL-IP-LOCAL', 'KUBE-LOAD-BALANCER',
  'KUBE-LOAD-BALANCER-LOCAL', 'KUBE-LOAD-BALANCER-FW', 'KUBE-LOAD-BALANCER-SOURCE-IP', 'KUBE-LOAD-BALANCER-SOURCE-CIDR',
  'KUBE-NODE-PORT-SCTP-HASH', 'KUBE-NODE-PORT-LOCAL-SCTP-HASH', 'KUBE-NODE-PORT-TCP', 'KUBE-NODE-PORT-LOCAL-TCP',
  'KUBE-NODE-PORT-UDP', 'KUBE-NODE-PORT-LOCAL-UDP', 'KUBE-HEALTH-CHECK-NODE-PORT',
];

/** `ip -batch` input binding every ClusterIP on the VIP link. */
export function ipBatchVips(services: readonly BenchService[], link = 'kube-ipvs0'): string {
  return services.map((s) => `address add ${s.clusterIP}/32 dev ${link}`).join('\n') + '\n';
}
