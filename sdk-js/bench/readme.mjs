#!/usr/bin/env node
// Runs the README quickstart's consume loop on a backlog and reports its rate.
//
//   node bench/readme.mjs [-n 50000] [--reps 3]
//
// The loop is the README's own code: the `consume.mjs` block is read from
// README.md (scripts/readme-blocks.mjs), written to a temporary file and
// imported, and its consume(nc, count) is called on a fresh `fibril serve`
// (FIBRIL_BIN, or built) whose topic `orders` holds n messages for the
// group `billing`. The rate counts messages taken and acked, until every
// ack is answered (nc.flush()). Not part of `make test`.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { connect } from '../dist/index.js';
import { blocks } from '../scripts/readme-blocks.mjs';
import { serverBinary } from '../test/helpers/server.mjs';

const { values: a } = parseArgs({ options: { n: { type: 'string', short: 'n', default: '50000' }, reps: { type: 'string', default: '3' } } });
const n = Number(a.n);
const dir = mkdtempSync(join(tmpdir(), 'fibril-bench-readme-'));
const file = join(dir, 'consume.mjs');
writeFileSync(file, blocks().find((b) => b.file === 'consume.mjs').code);
const { consume } = await import(pathToFileURL(file).href);

const rates = [];
const cpus = [];
for (let rep = 0; rep < Number(a.reps); rep++) {
  const data = join(dir, `data-${rep}`);
  const proc = spawn(serverBinary(), ['serve', '-ready-json', '-listen', '127.0.0.1:0', '-data', data, '-log-level', 'warn'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise((r) => createInterface({ input: proc.stdout }).once('line', r));
  const nc = await connect({ servers: `nats://${JSON.parse(line).addr}` });
  await nc.topics.create('orders', {}, { existOk: true });
  await nc.groups.create('orders', 'billing', {}, { existOk: true });
  const ps = [];
  for (let i = 0; i < n; i++) ps.push(nc.publish('orders', '1'));
  await Promise.all(ps);
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const total = await consume(nc, n);
  await nc.flush(); // every ack answered
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  if (total !== n) throw new Error(`consume returned ${total}, want ${n}`);
  rates.push((n / ms) * 1000);
  cpus.push((cpu.user + cpu.system) / n);
  console.log(`README consume loop: ${n} msgs, ${Math.round(rates.at(-1)).toLocaleString('en')} msgs/s acked, ${cpus.at(-1).toFixed(1)} us CPU/msg`);
  await nc.close();
  proc.kill('SIGTERM');
  await new Promise((r) => proc.once('exit', r));
}
rmSync(dir, { recursive: true, force: true });
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
console.log(JSON.stringify({ readme_consume_msgs_per_s: Math.round(median(rates)), cpu_us_per_msg: Number(median(cpus).toFixed(1)) }));
