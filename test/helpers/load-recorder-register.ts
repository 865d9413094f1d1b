// `node --import` this (with LOAD_LOG=file) to record the modules loaded from node_modules.
import { register } from 'node:module';

register('./load-recorder.js', import.meta.url, { data: { file: process.env.LOAD_LOG ?? '/dev/null' } });
