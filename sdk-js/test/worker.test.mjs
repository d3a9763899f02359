// Runs examples/worker.mjs against the real server: jobs are processed with
// concurrency, failing ones retried with backoff, and SIGTERM shuts it down
// cleanly with the job in progress settled.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from '../dist/index.js';
import { startServer, waitFor } from './helpers/server.mjs';

const example = join(dirname(fileURLToPath(import.meta.url)), '../examples/worker.mjs');

function runWorker(t, url, extra = []) {
  const proc = spawn(process.execPath, [example, '--url', url, '--topic', 'jobs', '--group', 'workers', '-n', '4', '--backoff', '20', ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines = [];
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d));
  createInterface({ input: proc.stdout }).on('line', (l) => lines.push(l));
  const exited = new Promise((r) => proc.once('exit', (code, signal) => r({ code, signal })));
  t.after(() => proc.kill('SIGKILL'));
  return { proc, lines, exited, stderr: () => stderr };
}

test('worker example: concurrency, ack, nack with backoff, clean SIGTERM', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url });
  t.after(() => nc.close());
  await nc.topics.create('jobs');
  await nc.groups.create('jobs', 'workers', { maxDeliveries: 5 });
  const w = runWorker(t, srv.url);
  await waitFor(() => w.lines.includes('ready'), { what: `worker ready (stderr: ${w.stderr()})` });

  const jobs = [];
  for (let i = 0; i < 12; i++) jobs.push(`job-${i}`);
  jobs.push('fail:1', 'fail:2', 'sleep:200', 'sleep:200', 'sleep:200', 'sleep:200');
  await Promise.all(jobs.map((j) => nc.publish('jobs', j)));
  const doneOf = (j) => w.lines.find((l) => l.startsWith(`done ${j} `));
  await waitFor(() => jobs.every(doneOf), { timeout: 20000, what: `all jobs done; got ${w.lines.join(' | ')}` });
  assert.equal(doneOf('fail:1'), 'done fail:1 attempt=2');
  assert.equal(doneOf('fail:2'), 'done fail:2 attempt=3');
  assert.ok(w.lines.includes('retry fail:2 attempt=1 delay=20'));
  assert.ok(w.lines.includes('retry fail:2 attempt=2 delay=40'), 'backoff doubles');
  // The four sleeps overlap: concurrency is real.
  const startIdx = w.lines.map((l, i) => (l === 'start sleep:200' ? i : -1)).filter((i) => i >= 0);
  const firstDone = w.lines.findIndex((l) => l.startsWith('done sleep:200'));
  assert.ok(startIdx.filter((i) => i < firstDone).length >= 2, `sleeps did not overlap: ${w.lines.join(' | ')}`);

  // SIGTERM while a job is in progress: it finishes and is acked, then exit 0.
  await nc.publish('jobs', 'sleep:300');
  await waitFor(() => w.lines.includes('start sleep:300'), { what: 'long job started' });
  w.proc.kill('SIGTERM');
  const { code } = await w.exited;
  assert.equal(code, 0, w.stderr());
  assert.equal(w.lines.at(-1), 'stopped');
  assert.ok(w.lines.includes('done sleep:300 attempt=1'), 'the job in progress was finished, not dropped');
  await waitFor(async () => {
    const gi = await nc.groups.info('jobs', 'workers');
    return gi.pending + gi.inflight === 0;
  }, { what: 'every job settled' });
});

test('worker example: SIGTERM with a backlog exits within 1 s, the rest handed back', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url });
  t.after(() => nc.close());
  const total = 200;
  await nc.topics.create('jobs', { partitions: 1 });
  await nc.groups.create('jobs', 'workers', { leaseMs: 600000 });
  await Promise.all(Array.from({ length: total }, () => nc.publish('jobs', 'sleep:50')));
  const w = runWorker(t, srv.url, ['-n', '2', '--max-in-flight', '100']);
  await waitFor(() => w.lines.includes('ready'), { what: `worker ready (stderr: ${w.stderr()})` });
  const done = () => w.lines.filter((l) => l.startsWith('done ')).length;
  await waitFor(() => done() >= 10, { timeout: 15000, what: 'ten jobs done' });
  const t0 = Date.now();
  w.proc.kill('SIGTERM');
  const { code } = await w.exited;
  const took = Date.now() - t0;
  assert.equal(code, 0, w.stderr());
  assert.ok(took < 1000, `the worker took ${took} ms to exit after SIGTERM`);
  const gi = await nc.groups.info('jobs', 'workers');
  assert.equal(gi.inflight, 0);
  assert.equal(gi.pending, total - done(), `${done()} done`);
});
