// The sysctls kube-proxy sets (its IPVS mode's), written to /proc/sys directly (no process). They
// belong to the network namespace of the calling process.
import { readFileSync, writeFileSync } from 'node:fs';

export interface SysctlResult {
  name: string;
  value: string;
  ok: boolean;
  error?: string;
}

/** net.ipv4.vs.run_estimation (ipvsync's own; kube-proxy leaves it): false stops IPVS's rate
 *  estimation, whose timer before Linux 6.2 walks every service and destination every 2 s in
 *  softirq (config.ts, ipvs.runEstimation). */
export function runEstimationSysctl(on: boolean): [string, string] {
  return ['net/ipv4/vs/run_estimation', on ? '1' : '0'];
}

/** Forwarding: the node routes the traffic it translated to the pods (both data planes). */
export const FORWARDING: [string, string] = ['net/ipv4/ip_forward', '1'];

/** net.ipv4.vs.conntrack=1 lets IPVS-forwarded packets through conntrack, so the nftables
 *  masquerade applies; expire_nodest_conn / expire_quiescent_template drop connections and
 *  persistence templates of removed or weight-0 real servers; strict ARP keeps the node from
 *  answering ARP for the VIPs on kube-ipvs0. `runEstimation`, when given:
 *  runEstimationSysctl. In `mode` nftables: forwarding alone. */
export function proxySysctls(strictARP: boolean, runEstimation?: boolean, mode: 'ipvs' | 'nftables' = 'ipvs'): Array<[string, string]> {
  // the nftables data plane needs forwarding only (no IPVS, no VIPs to hide from ARP)
  if (mode === 'nftables') return [FORWARDING];
  const s: Array<[string, string]> = [
    FORWARDING,
    ['net/ipv4/vs/conntrack', '1'],
    ['net/ipv4/vs/expire_nodest_conn', '1'],
    ['net/ipv4/vs/expire_quiescent_template', '1'],
  ];
  if (strictARP) s.push(['net/ipv4/conf/all/arp_ignore', '1'], ['net/ipv4/conf/all/arp_announce', '2']);
  if (runEstimation !== undefined) s.push(runEstimationSysctl(runEstimation));
  return s;
}

export function applySysctls(settings: Array<[string, string]>, root = '/proc/sys'): SysctlResult[] {
  return settings.map(([name, value]) => {
    const path = `${root}/${name}`;
    try {
      if (readFileSync(path, 'utf8').trim() !== value) writeFileSync(path, value);
      return { name: name.replace(/\//g, '.'), value, ok: true };
    } catch (e) {
      return { name: name.replace(/\//g, '.'), value, ok: false, error: (e as Error).message };
    }
  });
}
