// `ipvsync sync`, `ipvsync proxy`, `ipvsync cleanup`: the service proxy from the command line.
import { readdirSync, statSync, watch } from 'node:fs';
import { hostname } from 'node:os';
import type { Command } from 'commander';
import type { EngineKernel } from '../engine/engine.js';
import { planWrites } from '../engine/engine.js';
import { NetlinkError } from '../errors.js';
import { Conntrack } from '../kernel/conntrack.js';
import { Ipvs } from '../kernel/ipvs.js';
import { Links } from '../kernel/links.js';
import { Nftables } from '../kernel/nftables.js';
import { loadManifests } from '../kube/manifests.js';
import type { HandleOptions } from '../native.js';
import { GLUE_TABLE } from '../proxy/glue.js';
import { describePlan, nodeAddresses, Proxier } from '../proxy/proxier.js';
import { applySysctls, proxySysctls } from '../proxy/sysctl.js';
import { SyncRunner } from '../engine/runner.js';
import { canonicalAddress } from '../engine/ipvs-model.js';

interface KernelOpts {
  glue: boolean;
}

async function openKernel(h: HandleOptions, o: KernelOpts): Promise<EngineKernel> {
  const k: EngineKernel = { ipvs: await Ipvs.open(h), links: await Links.open(h), conntrack: await Conntrack.open(h) };
  if (o.glue) k.nft = await Nftables.open(h);
  return k;
}

function list(v: string, prev: string[] = []): string[] {
  return [...prev, ...v.split(',').map((x) => x.trim()).filter(Boolean)];
}

interface SyncOpts {
  file: string[];
  nodeName?: string;
  nodeIp?: string[];
  clusterCidr?: string[];
  nodeportAddresses?: string[];
  scheduler?: string;
  masqueradeAll?: boolean;
  vipLink: string;
  glue: boolean;
  sysctl: boolean;
  dryRun?: boolean;
  json?: boolean;
}

/** `ipvsync sync`, `proxy`, `cleanup` */
export function registerProxy(program: Command, handleOptions: () => HandleOptions): void {
  program
    .command('sync')
    .description('program the kernel once from Service/EndpointSlice/Endpoints manifests (kube-proxy IPVS semantics)')
    .requiredOption('-f, --file <path...>', 'YAML/JSON manifest files or folders')
    .option('--node-name <name>', 'this node (EndpointSlice nodeName), default the hostname')
    .option('--node-ip <ip>', 'node addresses for NodePorts (repeatable or comma-separated; default every local address)', list)
    .option('--cluster-cidr <cidr>', 'pod CIDR(s): traffic to VIPs from outside them is masqueraded', list)
    .option('--nodeport-addresses <cidr>', 'NodePorts only on node addresses in these CIDRs', list)
    .option('--scheduler <name>', 'default IPVS scheduler', 'rr')
    .option('--masquerade-all', 'masquerade all traffic to service VIPs')
    .option('--vip-link <name>', 'the dummy link holding the VIPs', 'kube-ipvs0')
    .option('--no-glue', 'do not program the nftables glue (masquerade, hairpin, source ranges)')
    .option('--no-sysctl', 'do not set the IPVS sysctls kube-proxy sets')
    .option('--dry-run', 'print the writes it would make and change nothing')
    .option('--json', 'machine-readable output')
    .action(async (o: SyncOpts) => {
      const h = handleOptions();
      const manifests = await loadManifests(o.file);
      const kernel = await openKernel(h, { glue: o.glue });
      const addrs = o.nodeIp?.length ? o.nodeIp.map(canonicalAddress) : nodeAddresses(await kernel.links!.addresses(), o.vipLink);
      const proxier = new Proxier(kernel, {
        node: { name: o.nodeName ?? hostname(), addresses: addrs },
        config: {
          scheduler: o.scheduler ?? 'rr',
          ...(o.clusterCidr ? { clusterCIDRs: o.clusterCidr } : {}),
          ...(o.nodeportAddresses ? { nodePortAddresses: o.nodeportAddresses } : {}),
          ...(o.masqueradeAll ? { masqueradeAll: true } : {}),
        },
        vipLink: o.vipLink,
        glue: o.glue,
      });
      for (const s of manifests.services) proxier.onServiceUpdate(s);
      for (const s of manifests.endpointSlices) proxier.onSliceUpdate(s);

      if (o.dryRun) {
        const { plan, model } = await proxier.plan(true);
        if (o.json) {
          console.log(JSON.stringify({ ops: planWrites(plan), warnings: model.warnings }, null, 2));
        } else {
          const lines = describePlan(plan);
          for (const l of lines) console.log(l);
          console.log(`# ${lines.length} write(s) planned; nothing changed`);
          for (const w of model.warnings) console.error(`warning: ${JSON.stringify(w)}`);
        }
        return;
      }
      const sysctls = o.sysctl && !h.netns ? applySysctls(proxySysctls(false)) : [];
      const { report, model } = await proxier.sync(true);
      if (o.json) {
        console.log(JSON.stringify({ report: { ...report, errors: report.errors.map(errJson) }, sysctls, warnings: model.warnings }, null, 2));
      } else {
        const kinds = (['addresses', 'ipsets', 'nft', 'ipvs'] as const).filter((k) => report[k].writes > 0);
        console.log(
          `synced ${model.services.length} virtual services, ${model.vips.length} VIPs: ` +
            (kinds.length ? kinds.map((k) => `${k} ${JSON.stringify(report[k].ops)}`).join(', ') : 'nothing to change') +
            ` (${report.durations.totalMs.toFixed(1)} ms)`,
        );
        for (const s of sysctls.filter((x) => !x.ok)) console.error(`warning: sysctl ${s.name}=${s.value}: ${s.error}`);
        for (const w of model.warnings) console.error(`warning: ${JSON.stringify(w)}`);
        for (const e of report.errors) console.error(`error: ${e.message}`);
      }
      if (report.errors.length) process.exitCode = 1;
    });

  program
    .command('proxy')
    .description('run the service proxy: watch a manifests folder (--manifests) or the Kubernetes API')
    .option('--manifests <dir>', 'watch this folder of manifests instead of a cluster')
    .option('--kubeconfig <file>', 'kubeconfig (default: in-cluster)')
    .option('--master <url>', 'API server URL (overrides the kubeconfig)')
    .option('--config <file>', 'KubeProxyConfiguration-style YAML')
    .option('--hostname-override <name>', 'this node')
    .option('--node-ip <ip>', 'node addresses for NodePorts', list)
    .option('--cluster-cidr <cidr>', 'pod CIDR(s)', list)
    .option('--vip-link <name>', 'the dummy link holding the VIPs', 'kube-ipvs0')
    .option('--no-glue', 'do not program the nftables glue')
    .option('--min-sync-period <ms>', 'coalesce changes for at least this long', '1000')
    .option('--sync-period <ms>', 'full resync at least this often', '30000')
    .action(async (o: { manifests?: string; kubeconfig?: string; master?: string; config?: string; hostnameOverride?: string; nodeIp?: string[]; clusterCidr?: string[]; vipLink: string; glue: boolean; minSyncPeriod: string; syncPeriod: string }) => {
      await runProxy(o, handleOptions());
    });

  program
    .command('cleanup')
    .description('remove everything ipvsync programmed (its VIP link, the virtual servers on it, its nftables tables) and nothing else')
    .option('--vip-link <name>', 'the dummy link holding the VIPs', 'kube-ipvs0')
    .option('--node-ip <ip>', 'the node addresses whose NodePort virtual servers (ports 30000-32767) go (default every local address, as sync)', list)
    .action(async (o: { vipLink: string; nodeIp?: string[] }) => {
      const h = handleOptions();
      const r = await cleanup(h, o.vipLink, o.nodeIp);
      console.log(`removed ${r.services} virtual services, ${r.tables} nftables tables, ${r.link ? `link ${o.vipLink}` : 'no link'}`);
    });
}

function errJson(e: NetlinkError) {
  return { message: e.message, code: e.code, errno: e.errno, kind: e.kind, op: e.op, index: e.index, extack: e.extack };
}

/** Removes what the proxy owns: virtual servers on the VIP link's addresses and NodePort-range
 *  ones on the node addresses, the glue tables, the VIP link. Foreign objects stay.
 *  `nodeIps` defaults, like sync's NodePort addresses, to every local address off the VIP link:
 *  a sync without --node-ip puts NodePorts on all of them, so a cleanup without it must find
 *  them all. */
export async function cleanup(h: HandleOptions, vipLink: string, nodeIps?: string[]): Promise<{ services: number; tables: number; link: boolean }> {
  const ipvs = await Ipvs.open(h);
  const links = await Links.open(h);
  const link = await links.get(vipLink);
  const vips = new Set(link ? (await links.addresses({ link: vipLink })).map((a) => canonicalAddress(a.address)) : []);
  const nodes = new Set((nodeIps?.length ? nodeIps : nodeAddresses(await links.addresses(), vipLink)).map(canonicalAddress));
  const doomed = (await ipvs.services()).filter(
    (s) => s.address !== undefined && (vips.has(canonicalAddress(s.address)) || (nodes.has(canonicalAddress(s.address)) && s.port! >= 30000 && s.port! <= 32767)),
  );
  const r = await ipvs.apply(doomed.map((s) => ({ op: 'deleteService' as const, service: { protocol: s.protocol!, address: s.address!, port: s.port! } })), { stopOnError: false });
  let tables = 0;
  try {
    const nft = await Nftables.open(h);
    const have = (await nft.list({ elements: false })).tables.filter((t) => t.name === GLUE_TABLE && (t.family === 'ip' || t.family === 'ip6'));
    if (have.length) {
      (await nft.commit(have.map((t) => ({ verb: 'delete' as const, kind: 'table' as const, table: { family: t.family, name: t.name } })))).orThrow();
      tables = have.length;
    }
  } catch (e) {
    // A kernel without nftables has no glue to remove.
    if (!(e instanceof NetlinkError) || (e.code !== 'EAFNOSUPPORT' && e.code !== 'EOPNOTSUPP' && e.kind !== 'unsupported')) throw e;
  }
  if (link) {
    const lr = await links.apply([{ op: 'delLink', name: vipLink }]);
    if (!lr.ok) throw lr.errors[0];
  }
  if (!r.ok && r.errors[0]) throw r.errors[0];
  return { services: r.count('ok'), tables, link: !!link };
}

/** Reads a manifests folder into the proxier, dropping objects that disappeared. */
async function loadFolder(p: Proxier, dir: string, known: { services: Set<string>; slices: Set<string> }): Promise<void> {
  const m = await loadManifests([dir]);
  const key = (o: { metadata?: { namespace?: string; name?: string } }) => `${o.metadata?.namespace ?? 'default'}/${o.metadata?.name}`;
  const services = new Set(m.services.map(key));
  const slices = new Set(m.endpointSlices.map(key));
  for (const k of known.services) if (!services.has(k)) p.onServiceDelete(k);
  for (const k of known.slices) if (!slices.has(k)) p.onSliceDelete(k);
  for (const s of m.services) p.onServiceUpdate(s);
  for (const s of m.endpointSlices) p.onSliceUpdate(s);
  known.services = services;
  known.slices = slices;
}

async function runProxy(
  o: { manifests?: string; kubeconfig?: string; master?: string; hostnameOverride?: string; nodeIp?: string[]; clusterCidr?: string[]; vipLink: string; glue: boolean; minSyncPeriod: string; syncPeriod: string },
  h: HandleOptions,
): Promise<void> {
  const log = (msg: string, fields: Record<string, unknown> = {}) => console.log(JSON.stringify({ ts: new Date().toISOString(), level: 'info', msg, ...fields }));
  const kernel = await openKernel(h, { glue: o.glue });
  const addrs = o.nodeIp?.length ? o.nodeIp : nodeAddresses(await kernel.links!.addresses(), o.vipLink);
  const proxier = new Proxier(kernel, {
    node: { name: o.hostnameOverride ?? hostname(), addresses: addrs },
    config: { scheduler: 'rr', ...(o.clusterCidr ? { clusterCIDRs: o.clusterCidr } : {}) },
    vipLink: o.vipLink,
    glue: o.glue,
  });
  if (!h.netns) applySysctls(proxySysctls(false));
  const runner = new SyncRunner(
    async (trigger) => {
      const r = await proxier.sync(trigger !== 'request');
      log('sync', { trigger, mode: r.report.mode, writes: r.report.ipvs.writes + r.report.addresses.writes + r.report.nft.writes, errors: r.report.errors.length, ms: Math.round(r.report.durations.totalMs) });
      if (r.report.errors.length) throw r.report.errors[0];
    },
    { minIntervalMs: Number(o.minSyncPeriod), maxIntervalMs: Number(o.syncPeriod) },
  );
  let stopSource: () => Promise<void> | void = () => undefined;
  if (o.manifests) {
    const dir = o.manifests;
    const known = { services: new Set<string>(), slices: new Set<string>() };
    await loadFolder(proxier, dir, known);
    if (!statSync(dir).isDirectory() || readdirSync(dir).length === 0) log('manifests folder is empty', { dir });
    const w = watch(dir, () => {
      loadFolder(proxier, dir, known).then(
        () => runner.request(),
        (e: unknown) => log('manifests not reloaded', { error: (e as Error).message }),
      );
    });
    stopSource = () => w.close();
  } else {
    const { KubeSources } = await import('../kube/informers.js');
    const { loadKubeConfig } = await import('../kube/kubeconfig.js');
    const sources = new KubeSources({
      kubeConfig: loadKubeConfig({ ...(o.kubeconfig ? { kubeconfig: o.kubeconfig } : {}), ...(o.master ? { server: o.master } : {}) }),
      nodeName: o.hostnameOverride ?? hostname(),
      handlers: {
        onServiceUpdate: (s) => (proxier.onServiceUpdate(s), runner.request()),
        onServiceDelete: (k) => (proxier.onServiceDelete(k), runner.request()),
        onSliceUpdate: (s) => (proxier.onSliceUpdate(s), runner.request()),
        onSliceDelete: (k) => (proxier.onSliceDelete(k), runner.request()),
        onNode: () => undefined,
      },
    });
    sources.start();
    // Never program from an empty cache: wait for every first list.
    await sources.synced();
    stopSource = () => sources.stop();
  }
  runner.start();
  log('proxy started', { node: proxier.node.name, nodeAddresses: addrs, source: o.manifests ? `manifests ${o.manifests}` : 'kubernetes' });
  await new Promise<void>((resolve) => {
    const stop = () => {
      log('stopping; the data plane stays in place');
      void Promise.resolve(stopSource()).then(() => runner.stop()).then(resolve);
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
}
