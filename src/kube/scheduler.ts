// Per-service IPVS scheduler and flags from annotations, validated: a bad value is dropped with a
// warning (a typo in one Service must never break the proxy for the others).
import { SCHEDULERS, type ServiceFlag } from '../kernel/ipvs.js';
import { ANNOTATION_SCHEDULER, ANNOTATION_SCHEDULER_FLAGS } from './types.js';
import { member, present, show } from './fields.js';

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
