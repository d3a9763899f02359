#!/usr/bin/env node
// The publish + consume phases of bench/throughput.mjs with nats.js
// (@nats-io/transport-node and @nats-io/jetstream, not dependencies of this
// package: `make bench-peers` installs them into a directory of their own and
// sets NODE_PATH) against nats-server JetStream (file storage, default
// sync_interval: not fsynced before the PubAck), for comparison.
//
//   NODE_PATH=... node bench/nats.mjs [-n 20000] [--size 128]
//
// publish: js.publish, at most 1024 awaiting their PubAck (Fibril's window);
// consume: a durable consumer (max_ack_pending --inflight, like Fibril's
// maxInFlight), consumer.consume(), m.ack() each: a plain publish, never
// confirmed; the phase ends when every ack is written (nc.flush()).
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const require = createRequire(join(process.env.NODE_PATH ?? '.', 'x.js'));
const { connect } = await import(require.resolve('@nats-io/transport-node'));
const { jetstream, jetstreamManager, AckPolicy } = await import(require.resolve('@nats-io/jetstream'));

const { values: a } = parseArgs({
  options: { n: { type: 'string', short: 'n', default: '20000' }, size: { type: 'string', default: '128' }, inflight: { type: 'string', default: '512' } },
});
const n = Number(a.n);
const payload = Buffer.alloc(Number(a.size), 'x');
const cpuPer = (c0, count) => {
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / count;
};

const port = await new Promise((r) => {
  const s = createServer().listen(0, '127.0.0.1', () => {
    const p = s.address().port;
    s.close(() => r(p));
  });
});
const dir = mkdtempSync(join(tmpdir(), 'nats-bench-js-'));
writeFileSync(join(dir, 'nats.conf'), `port: ${port}\nhost: 127.0.0.1\njetstream { store_dir: "${dir}/js" }\n`);
const proc = spawn('nats-server', ['-c', join(dir, 'nats.conf')], { stdio: 'ignore' });
let nc;
for (let i = 0; ; i++) {
  try {
    nc = await connect({ servers: `127.0.0.1:${port}` });
    break;
  } catch (e) {
    if (i > 150) throw e;
    await new Promise((r) => setTimeout(r, 100));
  }
}
const jsm = await jetstreamManager(nc);
await jsm.streams.add({ name: 'BENCH', subjects: ['bench'], storage: 'file' });
const js = jetstream(nc);
const out = {};

let t0 = performance.now();
let c0 = process.cpuUsage();
const inflight = new Set();
for (let i = 0; i < n; i++) {
  const p = js.publish('bench', payload).then(() => inflight.delete(p));
  inflight.add(p);
  if (inflight.size >= 1024) await Promise.race(inflight);
}
await Promise.all(inflight);
let ms = performance.now() - t0;
out.publish_msgs_per_s = (n / ms) * 1000;
out.publish_cpu_us = cpuPer(c0, n);
console.log(`publish (PubAck, file store, default sync): ${n} in ${ms.toFixed(0)} ms = ${Math.round(out.publish_msgs_per_s)} msg/s`);

await jsm.consumers.add('BENCH', { durable_name: 'push', ack_policy: AckPolicy.Explicit, max_ack_pending: Number(a.inflight) });
const consumer = await js.consumers.get('BENCH', 'push');
t0 = performance.now();
c0 = process.cpuUsage();
let got = 0;
const msgs = await consumer.consume({ max_messages: Number(a.inflight) });
for await (const m of msgs) {
  m.ack();
  if (++got === n) break;
}
await nc.flush();
ms = performance.now() - t0;
out.consume_msgs_per_s = (n / ms) * 1000;
out.consume_cpu_us = cpuPer(c0, n);
console.log(`consume + ack each (max_ack_pending ${a.inflight}): ${n} in ${ms.toFixed(0)} ms = ${Math.round(out.consume_msgs_per_s)} msg/s`);

await nc.close();
proc.kill('SIGTERM');
await new Promise((r) => proc.once('exit', r));
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify(Object.fromEntries(Object.entries(out).map(([k, v]) => [k, Number(v.toFixed(1))]))));
