// The closed sets of the IPVS and ipset models are literal unions the compiler holds a caller
// to, and the scheduler's stays open to a custom module's name: each `@ts-expect-error` below
// fails the build if its type is widened to plain string, each plain line if it is narrowed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SCHEDULERS, type ForwardMethod, type IpvsProtocol, type Scheduler, type Service, type ServiceConfig, type ServiceFlag } from '../../src/kernel/ipvs.js';
import type { IpSetType } from '../../src/kernel/ipsets.js';
import type { ProxyConfig } from '../../src/kube/types.js';

test('schedulers: the kernel names, and any other name; protocols, methods, flags and set types closed', () => {
  const known: Scheduler = 'mh';
  const custom: Scheduler = 'my_sched'; // an out-of-tree ip_vs_my_sched module
  const fromConfig: ProxyConfig = { scheduler: custom };
  const svc: ServiceConfig = { protocol: 'sctp', address: '10.96.0.1', port: 80, scheduler: known, flags: ['mh-port'] };
  // @ts-expect-error: not an IPVS protocol
  const icmp: IpvsProtocol = 'icmp';
  // @ts-expect-error: not a forwarding method (masq is)
  const nat: ForwardMethod = 'nat';
  // @ts-expect-error: not a service flag
  const sticky: ServiceFlag = 'sticky';
  // @ts-expect-error: a set type ipvsync does not encode
  const mac: IpSetType = 'hash:mac';
  // what the kernel reports reads back as a Scheduler (a name from SCHEDULERS, or any other)
  const reported = (s: Service): Scheduler => s.scheduler;
  assert.ok(SCHEDULERS.includes('mh') && SCHEDULERS.includes('twos'));
  assert.deepEqual([fromConfig.scheduler, svc.scheduler, icmp, nat, sticky, mac, typeof reported], ['my_sched', 'mh', 'icmp', 'nat', 'sticky', 'hash:mac', 'function']);
});
