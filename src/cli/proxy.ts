// `ipvsync sync`, `ipvsync proxy`, `ipvsync cleanup`: the service proxy from the command line.
import { Option, type Command } from 'commander';
import { NetlinkError, errorJson } from '../errors.js';
import { Ipvs } from '../kernel/ipvs.js';
import { Links } from '../kernel/links.js';
import type { ManifestSet, ManifestWarning } from '../kube/manifests.js';
import type { ModelWarning } from '../kube/types.js';
import type { HandleOptions } from '../native.js';
import { nodeAddresses } from '../proxy/node-addresses.js';
import { applySysctls, proxySysctls } from '../proxy/sysctl.js';
import { COMMAND_FLAGS, loadConfig, toProxierOptions, type FlagSpec } from '../daemon/config.js';
import type { CleanupResult } from '../proxy/cleanup.js';
import { KUBE_IPSET_PREFIX } from '../proxy/ipvs/kube-ipsets.js';

// The proxier, the engine, the manifests reader and the nftables and route handles are loaded
// when a command needs them: with the proxier on its sync thread (which loads its own), the
// daemon's thread never does (~2 MB of resident memory per thread that loads them). The
// daemon itself (its servers, metrics, watchers: ~60 ms of loading) only for `proxy`, so the
// other commands (`ipset restore`, `ipvs restore`, …) start without it.
const proxierModule = () => import('../proxy/proxier.js');

function list(v: string, prev: string[] = []): string[] {
  return [...prev, ...v.split(',').map((x) => x.trim()).filter(Boolean)];
}

interface SyncOpts {
  file: string[];
  glue: boolean;
  kubeProxyIpsets?: boolean;
  sysctl: boolean;
  dryRun?: boolean;
  json?: boolean;
}

/** The configuration's flags (`fields`: every one for `proxy`, those marked for `sync`), then
 *  the options both commands have that are not configuration. */
function configOptions(cmd: Command, fields: readonly FlagSpec[]): Command {
  for (const f of fields) {
    const flags = `${f.short ? `-${f.short}, ` : ''}--${f.flag}${f.kind.arg ? ` ${f.kind.arg}` : ''}`;
    const help = f.alias ? `${f.help}; also --${f.alias}` : f.help;
    if (f.kind.list) cmd.option(flags, help, list);
    else cmd.option(flags, help);
    if (f.alias) cmd.addOption(new Option(`--${f.alias}${f.kind.arg ? ` ${f.kind.arg}` : ''}`).hideHelp());
    if (f.negatedHelp) cmd.option(`--no-${f.flag}`, f.negatedHelp);
  }
  return cmd
    .option('--no-glue', 'IPVS mode: do not program the nftables glue (masquerade, hairpin, source ranges)')
    .option('--kube-proxy-ipsets', "IPVS mode: also maintain kube-proxy's ipsets (KUBE-CLUSTER-IP …) for iptables rules that reference them");
}

/** `ipvsync sync`, `proxy`, `cleanup` */
export function registerProxy(program: Command, handleOptions: () => HandleOptions): void {
  configOptions(
    program
      .command('sync')
      .description('program the kernel once from Service/EndpointSlice/Endpoints manifests, as kube-proxy would: IPVS mode (virtual servers, VIPs on a dummy link, nftables glue; the default) or --proxy-mode nftables (one nftables table per family, no IPVS)')
      .requiredOption('-f, --file <path...>', 'YAML/JSON manifest files or folders'),
    COMMAND_FLAGS.filter((f) => f.sync),
  )
    .option('--no-sysctl', 'do not set the sysctls kube-proxy sets (IPVS mode: forwarding and the IPVS ones; nftables mode: forwarding)')
    .option('--dry-run', 'print the writes it would make and change nothing')
    .option('--json', 'machine-readable output')
    .action(async (o: SyncOpts) => {
      const h = handleOptions();
      // The proxy's configuration from the flags: every value checked (CIDRs with host bits
      // cleared, with a warning) and refused before anything is read or opened.
      const { config: cfg, warnings } = loadConfig({ flags: { ...o } });
      for (const w of warnings) console.error(`warning: ${w}`);
      const [{ loadManifests }, { openKernel }, { Proxier, describePlan, PLAN_SUMMARY_HEADER }, { planWrites, REPORT_KINDS }] = await Promise.all([
        import('../kube/manifests.js'),
        import('../proxy/kernel.js'),
        proxierModule(),
        import('../engine/engine.js'),
      ]);
      // Read first (a bad manifest fails before anything is opened); dropped once fed: the
      // proxier keeps only what it reads of each object.
      let manifests: ManifestSet | undefined = await loadManifests(o.file);
      const manifestWarnings = manifests.warnings;
      const kernel = await openKernel(h, { glue: o.glue, mode: cfg.mode });
      const addrs = cfg.nodeIPs.length ? cfg.nodeIPs : nodeAddresses(await kernel.links!.addresses(), cfg.vipLink);
      const proxier = new Proxier(kernel, toProxierOptions(cfg, { addresses: addrs, glue: o.glue, kubeIpsets: !!o.kubeProxyIpsets }));
      for (const s of manifests.services) proxier.onServiceUpdate(s);
      for (const s of manifests.endpointSlices) proxier.onSliceUpdate(s);
      for (const n of manifests.nodes) proxier.onNode(n);
      for (const c of manifests.serviceCIDRs) proxier.onServiceCIDR(c);
      manifests = undefined;

      if (o.dryRun) {
        const { plan, summary } = await proxier.plan(true);
        if (o.json) {
          console.log(JSON.stringify({ ops: planWrites(plan), warnings: summary.warnings, manifestWarnings }, null, 2));
        } else {
          const lines = describePlan(plan);
          console.log(PLAN_SUMMARY_HEADER);
          for (const l of lines) console.log(l);
          console.log(`# ${lines.length} write(s) planned; nothing changed`);
          printWarnings(manifestWarnings, summary.warnings);
        }
        return;
      }
      const sysctls = o.sysctl && !h.netns ? applySysctls(proxySysctls(false, undefined, cfg.mode)) : [];
      let synced: Awaited<ReturnType<typeof proxier.sync>>;
      try {
        synced = await proxier.sync(true);
      } catch (e) {
        // The sync stopped before it had a model to report: the translation's warnings may say
        // which object it was (a value it let through that the kernel layer refused).
        printWarnings(manifestWarnings, proxier.warnings());
        throw e;
      }
      const { report, summary, model } = synced;
      if (o.json) {
        console.log(JSON.stringify({ report: { ...report, errors: report.errors.map(errorJson) }, sysctls, warnings: summary.warnings, manifestWarnings }, null, 2));
      } else {
        const kinds = REPORT_KINDS.filter((k) => report[k].writes > 0);
        console.log(
          (model ? `synced ${model.services.length} virtual services, ${model.vips.length} VIPs: ` : `synced ${proxier.services.size} services (nftables data plane): `) +
            (kinds.length ? kinds.map((k) => `${k} ${JSON.stringify(report[k].ops)}`).join(', ') : 'nothing to change') +
            ` (${report.durations.totalMs.toFixed(1)} ms)`,
        );
        for (const s of sysctls.filter((x) => !x.ok)) console.error(`warning: sysctl ${s.name}=${s.value}: ${s.error}`);
        printWarnings(manifestWarnings, summary.warnings);
        for (const i of report.invalid) console.error(`refused: ${JSON.stringify(i)}`);
        for (const e of report.errors) console.error(`error: ${e.message}`);
      }
      if (report.errors.length) process.exitCode = 1;
    });

  configOptions(
    program
      .command('proxy')
      .description('run the service proxy, a drop-in for kube-proxy in IPVS mode (the default) or nftables mode (--proxy-mode nftables): watch the Kubernetes API, or a manifests folder')
      .option('--manifests <dir>', 'watch this folder of Service/EndpointSlice manifests instead of a cluster')
      .option('--config <file>', "YAML: kube-proxy's KubeProxyConfiguration, and ipvsync's IpvsyncConfiguration as a second document (flags override it)")
      .option('--write-config-to <file>', 'write the effective configuration and exit'),
    COMMAND_FLAGS,
  ).action(async (o: Record<string, unknown>) => {
    const { runProxy } = await import('../daemon/run.js');
    await runProxy(o, handleOptions());
  });

  program
    .command('cleanup')
    .description('remove everything ipvsync programmed (the virtual servers it recorded, its VIP addresses and routes, its nftables tables, its record) and nothing else')
    .option('--vip-link <name>', 'the dummy link holding the VIPs', 'kube-ipvs0')
    .option('--kube-proxy-ipsets', "also remove kube-proxy's ipsets (KUBE-*), which `proxy --kube-proxy-ipsets` owns")
    .action(async (o: { vipLink: string; kubeProxyIpsets?: boolean }) => {
      const h = handleOptions();
      const r = await cleanup(h, o.vipLink, o.kubeProxyIpsets ? { ipsetPrefix: KUBE_IPSET_PREFIX } : {});
      console.log(
        `removed ${r.services} virtual services, ${r.tables} nftables tables, ${r.link ? `link ${o.vipLink}` : 'no link'}, ${r.addresses} addresses, ${r.routes} routes, ${r.ipsets} ipsets` +
          (r.skipped.length ? ` (not in this kernel, skipped: ${r.skipped.join(', ')})` : ''),
      );
    });
}

/** Manifest objects skipped for their shape (the rest was read and is programmed), then what
 *  the translation warned of. */
function printWarnings(manifest: readonly ManifestWarning[], model: readonly ModelWarning[]): void {
  for (const w of manifest) console.error(`warning: skipped ${w.source}: ${w.message}`);
  for (const w of model) console.error(`warning: ${JSON.stringify(w)}`);
}

/** Removes what ipvsync owns, by the rule `sync` and `proxy` follow (README "Ownership"), and
 *  nothing else: proxy/cleanup.ts over this namespace's handles. What the kernel lacks (IPVS on
 *  a kernel the nftables data plane runs on; nftables; ipsets) holds nothing to remove: skipped,
 *  and named in `skipped`. */
export async function cleanup(h: HandleOptions, vipLink: string, opts: { ipsetPrefix?: string } = {}): Promise<CleanupResult & { skipped: string[] }> {
  const [{ Routes }, { Nftables }, { IpSets }, { removeOwned }] = await Promise.all([
    import('../kernel/routes.js'),
    import('../kernel/nftables.js'),
    import('../kernel/ipsets.js'),
    import('../proxy/cleanup.js'),
  ]);
  const skipped: string[] = [];
  const ifPresent = <T>(what: string, open: () => Promise<T>): Promise<T | undefined> =>
    open().catch((e: unknown) => {
      if (!(e instanceof NetlinkError && (e.code === 'EAFNOSUPPORT' || e.code === 'EOPNOTSUPP' || e.kind === 'unsupported'))) throw e;
      skipped.push(what);
      return undefined;
    });
  const ipvs = await ifPresent('IPVS', () => Ipvs.open(h));
  const nft = await ifPresent('nftables', () => Nftables.open(h));
  const ipsets = await ifPresent('ipsets', () => IpSets.open(h));
  const removed = await removeOwned(
    { links: await Links.open(h), routes: await Routes.open(h), ...(ipvs ? { ipvs } : {}), ...(nft ? { nft } : {}), ...(ipsets ? { ipsets } : {}) },
    vipLink,
    opts,
  );
  return { ...removed, skipped };
}
