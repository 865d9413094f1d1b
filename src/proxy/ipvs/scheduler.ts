// The IPVS data plane's scheduler: the configuration's default, and per service its annotations'
// scheduler and flags, validated: a bad value is dropped with a warning (a typo in one Service
// must never break the proxy for the others). The service model knows nothing of schedulers.
import { SCHEDULERS, type ServiceFlag } from '../../kernel/ipvs.js';
import { ANNOTATION_SCHEDULER, ANNOTATION_SCHEDULER_FLAGS, type ModelWarning, type ProxyConfig } from '../../kube/types.js';
import { member, present, show } from '../../kube/fields.js';

/** kube-proxy's IPVS mode's default scheduler. */
export const DEFAULT_SCHEDULER = 'rr';

export interface SchedulerChoice {
  scheduler: string;
  flags: ServiceFlag[];
  warnings: string[];
}

const KNOWN = new Set<string>(SCHEDULERS);

/** Which scheduler a flag belongs to; undefined: valid with any scheduler. */
const FLAG_SCHEDULER: Partial<Record<ServiceFlag, string>> = {
  'sh-fallback': 'sh',
  'sh-port': 'sh',
  'mh-fallback': 'mh',
  'mh-port': 'mh',
};
const ANNOTATION_FLAGS = new Set<string>(['one-packet', 'sh-fallback', 'sh-port', 'mh-fallback', 'mh-port', 'flag-1', 'flag-2', 'flag-3']);

export function isKnownScheduler(name: string): boolean {
  return KNOWN.has(name);
}

/** The configuration's scheduler, or the default with a warning when it names none Linux has. */
export function configScheduler(config: ProxyConfig, warnings: ModelWarning[]): string {
  const s = config.scheduler?.trim() || DEFAULT_SCHEDULER;
  if (KNOWN.has(s)) return s;
  warnings.push({ service: '', message: `config scheduler: unknown scheduler "${s}", using "${DEFAULT_SCHEDULER}"` });
  return DEFAULT_SCHEDULER;
}

/** The scheduler and flags a Service's annotations (a mapping, as read off the wire) choose. */
export function chooseScheduler(annotations: unknown, defaultScheduler: string): SchedulerChoice {
  const warnings: string[] = [];
  let scheduler = defaultScheduler;
  const text = (name: string): string => {
    const v = member(annotations, name);
    if (typeof v === 'string') return v;
    if (present(v)) warnings.push(`${name}: ${show(v)} is not a string, ignored`);
    return '';
  };
  const wanted = text(ANNOTATION_SCHEDULER).trim();
  if (wanted) {
    if (KNOWN.has(wanted)) scheduler = wanted;
    else warnings.push(`${ANNOTATION_SCHEDULER}: unknown scheduler "${wanted}", using "${defaultScheduler}"`);
  }
  const flags: ServiceFlag[] = [];
  const given = text(ANNOTATION_SCHEDULER_FLAGS);
  // kube-proxy's IPVS mode hashes the source port too with mh (FlagSourceHash): its default
  if (scheduler === 'mh' && !given.trim()) flags.push('mh-port');
  for (const raw of given.split(',')) {
    const flag = raw.trim();
    if (!flag) continue;
    if (flag === 'persistent') {
      warnings.push(`${ANNOTATION_SCHEDULER_FLAGS}: "persistent" comes from sessionAffinity: ClientIP, ignored`);
    } else if (!ANNOTATION_FLAGS.has(flag)) {
      warnings.push(`${ANNOTATION_SCHEDULER_FLAGS}: unknown flag "${flag}", ignored`);
    } else if (FLAG_SCHEDULER[flag as ServiceFlag] && FLAG_SCHEDULER[flag as ServiceFlag] !== scheduler) {
      warnings.push(`${ANNOTATION_SCHEDULER_FLAGS}: "${flag}" needs scheduler ${FLAG_SCHEDULER[flag as ServiceFlag]}, not ${scheduler}; ignored`);
    } else if (!flags.includes(flag as ServiceFlag)) {
      flags.push(flag as ServiceFlag);
    }
  }
  return { scheduler, flags, warnings };
}
