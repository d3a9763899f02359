#!/usr/bin/env node
// Throughput from Node against a real server: confirmed publishes, then
// push consumption with per-message acks, then fetch + ackAll batches.
//
//   node bench/throughput.mjs [--url nats://host:port] [-n 20000] [--size 128]
//
// Without --url it builds/starts `fibril serve` on 127.0.0.1:0 with a
// temporary data directory (FIBRIL_BIN to use a prebuilt binary).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { connect } from '../dist/index.js';
import { serverBinary } from '../test/helpers/server.mjs';

const { values: a } = parseArgs({
  options: {
    url: { type: 'string' },
    n: { type: 'string', short: 'n', default: '20000' },
    size: { type: 'string', default: '128' },
    durability: { type: 'string', default: 'group' },
    inflight: { type: 'string', default: '512' },
  },
});
const n = Number(a.n);
const payload = Buffer.alloc(Number(a.size), 'x');

let url = a.url;
let proc;
let dir;
if (!url) {
  dir = mkdtempSync(join(tmpdir(), 'fibril-sdkjs-bench-'));
  proc = spawn(serverBinary(), ['serve', '-ready-json', '-listen', '127.0.0.1:0', '-data', dir, '-log-level', 'warn'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise((r) => createInterface({ input: proc.stdout }).once('line', r));
  url = `nats://${JSON.parse(line).addr}`;
}

const cpuPer = (c0, count) => {
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / count;
};
const rate = (count, ms) => `${Math.round((count / ms) * 1000).toLocaleString('en')} msg/s`;
const nc = await connect({ servers: url });
const topic = `bench-${Date.now()}`;
await nc.topics.create(topic, { durability: a.durability });

const out = {};
let t0 = performance.now();
let c0 = process.cpuUsage();
const ps = [];
for (let i = 0; i < n; i++) ps.push(nc.publish(topic, payload));
await Promise.all(ps);
let ms = performance.now() - t0;
out.publish_msgs_per_s = (n / ms) * 1000;
out.publish_cpu_us = cpuPer(c0, n);
console.log(`publish (confirmed, ${a.durability}, ${payload.length} B, window ${nc.maxUnconfirmed}): ${n} in ${ms.toFixed(0)} ms = ${rate(n, ms)}`);

// The README's loop: ack each without awaiting (coalesced into ACK lines);
// the phase ends when every ack is answered (confirmed by the server).
t0 = performance.now();
c0 = process.cpuUsage();
let got = 0;
for await (const m of nc.consume(topic, 'push', { maxInFlight: Number(a.inflight) })) {
  m.ack();
  if (++got === n) break;
}
await nc.flush();
ms = performance.now() - t0;
out.consume_msgs_per_s = (n / ms) * 1000;
out.consume_cpu_us = cpuPer(c0, n);
console.log(`consume + ack each (maxInFlight ${a.inflight}): ${n} in ${ms.toFixed(0)} ms = ${rate(n, ms)}`);

t0 = performance.now();
got = 0;
while (got < n) {
  const batch = await nc.fetch(topic, 'pull', { max: 1000, waitMs: 1000 });
  if (batch.length === 0) break;
  got += batch.length;
  await nc.ackAll(batch);
}
ms = performance.now() - t0;
console.log(`fetch 1000 + ackAll: ${got} in ${ms.toFixed(0)} ms = ${rate(got, ms)}`);

await nc.close();
console.log(JSON.stringify(Object.fromEntries(Object.entries(out).map(([k, v]) => [k, Number(v.toFixed(1))]))));
if (proc) {
  proc.kill('SIGTERM');
  await new Promise((r) => proc.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
}
