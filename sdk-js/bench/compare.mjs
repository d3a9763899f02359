#!/usr/bin/env node
// This SDK and nats.js (against nats-server JetStream) side by side: runs
// bench/throughput.mjs and bench/nats.mjs alternately, --reps times each,
// and prints the medians with what each side guarantees. `make bench-peers`
// sets it up (nats.js in NODE_PATH, nats-server on PATH).
//
//   node bench/compare.mjs [-n 20000] [--reps 3] [--inflight 512]
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const { values: a } = parseArgs({
  options: { n: { type: 'string', short: 'n', default: '20000' }, reps: { type: 'string', default: '3' }, inflight: { type: 'string', default: '512' } },
});
const last = (file) => {
  const out = execFileSync(process.execPath, [join(here, file), '-n', a.n, '--inflight', a.inflight], { encoding: 'utf8', env: process.env });
  return JSON.parse(out.trim().split('\n').at(-1));
};
const fib = [];
const nat = [];
for (let i = 0; i < Number(a.reps); i++) {
  fib.push(last('throughput.mjs'));
  nat.push(last('nats.mjs'));
  console.log(`rep ${i + 1}: fibril ${JSON.stringify(fib.at(-1))}\n       nats.js ${JSON.stringify(nat.at(-1))}`);
}
const med = (rs, k) => [...rs.map((r) => r[k])].sort((x, y) => x - y)[Math.floor(rs.length / 2)];
const guarantees = {
  publish: 'Fibril: confirmed after fsync (durability group); JetStream: PubAck, file store, default sync_interval (not fsynced before the ack)',
  consume: 'Fibril: every ack confirmed (committed) before the phase ends; nats.js: m.ack() is a plain publish, never confirmed',
};
console.log(`\nmedians of ${a.reps} alternating runs, ${a.n} x 128 B messages, window ${a.inflight}`);
console.log('| phase | Fibril JS msgs/s (CPU us/msg) | nats.js msgs/s (CPU us/msg) | ratio | guarantees |');
console.log('| --- | --- | --- | --- | --- |');
for (const ph of ['publish', 'consume']) {
  const f = med(fib, `${ph}_msgs_per_s`);
  const n = med(nat, `${ph}_msgs_per_s`);
  const fmt = (x) => Math.round(x).toLocaleString('en');
  console.log(`| ${ph} | ${fmt(f)} (${med(fib, `${ph}_cpu_us`).toFixed(1)}) | ${fmt(n)} (${med(nat, `${ph}_cpu_us`).toFixed(1)}) | ${(f / n).toFixed(2)}x | ${guarantees[ph]} |`);
}
