// `ipvsync/testing`: an in-memory kernel with the real one's semantics, implementing the same
// interfaces as the real handles — for testing code built on ipvsync without root.
export { FakeIpvs } from './fake-ipvs.js';
export { FakeLinks, FakeRoutes, FakeIpSets, FakeNftables, FakeConntrack, fakeKernel } from './fake-kernel.js';
