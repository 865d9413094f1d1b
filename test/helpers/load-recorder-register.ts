// `node --import` this (with LOAD_LOG=file) to record the modules loaded from node_modules
// (LOAD_MATCH=text: those whose URL contains it).
import { register } from 'node:module';

register('./load-recorder.js', import.meta.url, { data: { file: process.env.LOAD_LOG ?? '/dev/null', ...(process.env.LOAD_MATCH ? { match: process.env.LOAD_MATCH } : {}) } });
