// Reconnect: the server crashes (SIGKILL) with publishes in flight and
// restarts on the same port and data directory. Every publish the SDK
// confirmed must be in the topic afterwards; publishes made while the link
// was down are sent once it is back; subscriptions resume.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, backoff } from '../dist/index.js';
import { startServer, waitFor } from './helpers/server.mjs';

test('reconnect after a crash loses no confirmed publish', async (t) => {
  let srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } });
  t.after(() => nc.close());
  try {
    await nc.topics.create('r', { durability: 'sync' });
  } catch (e) {
    if (e.code === 'internal') return t.skip(`durable engine unavailable in this server build: ${e.message}`);
    throw e;
  }
  const sub = nc.subscribe('_INBOX.live');
  await sub.ready;

  const confirmed = new Set();
  const failed = [];
  let killed;
  const track = (id, p) =>
    p.then(
      (pos) => {
        assert.ok(pos !== null);
        confirmed.add(id);
        if (confirmed.size === 50 && !killed) killed = srv.kill();
      },
      (e) => failed.push([id, e]),
    );
  const first = [];
  for (let i = 0; i < 400; i++) first.push(track(i, nc.publish('r', `m-${i}`)));
  await waitFor(() => killed, { what: 'the kill' });
  await killed;
  await waitFor(() => !nc.isConnected, { what: 'the SDK to notice the lost link' });
  // Published while disconnected: queued and sent after the reconnect.
  const second = [];
  for (let i = 400; i < 500; i++) second.push(track(i, nc.publish('r', `m-${i}`)));
  // Other commands made while down wait for the new link too.
  const info = nc.topics.info('r');
  const flushed = nc.flush();
  srv = await startServer(t, { port: srv.port, dataDir: srv.dataDir });
  await Promise.all([...first, ...second]);
  assert.equal((await info).name, 'r');
  await flushed;
  assert.deepEqual(failed, [], 'no publish failed');
  assert.equal(confirmed.size, 500);
  assert.ok(nc.reconnects >= 1);

  // Everything confirmed is stored (maybe twice: at-least-once).
  const stored = new Set();
  while (stored.size < 500) {
    const batch = await nc.fetch('r', 'check', { max: 200, waitMs: 2000 });
    assert.ok(batch.length > 0, `only ${stored.size} of 500 found`);
    for (const m of batch) stored.add(Number(m.string().slice(2)));
    await nc.ackAll(batch);
  }
  for (const id of confirmed) assert.ok(stored.has(id), `confirmed publish ${id} lost`);

  // The plain subscription was re-established on the new link.
  await nc.publish('_INBOX.live', 'after');
  for await (const m of sub) {
    assert.equal(m.string(), 'after');
    break;
  }
});

test('reconnect gives up after maxAttempts and closed() reports why', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url, reconnect: { maxAttempts: 2, initialDelayMs: 10, maxDelayMs: 20 } });
  const sub = nc.subscribe('_INBOX.gone');
  await sub.ready;
  await srv.kill();
  const err = await nc.closed();
  assert.equal(err.code, 'no_servers');
  assert.equal(nc.isClosed, true);
  await assert.rejects(sub.next(), (e) => e.code === 'connection_closed');
  await assert.rejects(nc.publish('_INBOX.x', 'y'), (e) => e.code === 'connection_closed');
});

test('without reconnect a lost link closes the connection', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url, reconnect: false });
  await srv.kill();
  const err = await nc.closed();
  assert.ok(err instanceof Error);
  assert.equal(nc.isClosed, true);
});

test('backoff doubles up to the cap', () => {
  const r = { maxAttempts: -1, initialDelayMs: 10, maxDelayMs: 100, jitter: 0.2 };
  for (let n = 0; n < 10; n++) {
    const base = Math.min(100, 10 * 2 ** n);
    const d = backoff(r, n);
    assert.ok(d >= base * 0.8 - 1 && d <= base * 1.2 + 1, `attempt ${n}: ${d}`);
  }
});

test('a silent link is detected by the pinger and replaced; a durable consumer resumes', async (t) => {
  const { corruptingProxy } = await import('./helpers/proxy.mjs');
  const srv = await startServer(t);
  if (!srv) return;
  const proxy = await corruptingProxy(t, srv, 'never-matches-xyz', 'never-matches-xyZ');
  const nc = await connect({ servers: proxy.url, pingIntervalMs: 50, reconnect: { initialDelayMs: 10, maxDelayMs: 50 } });
  t.after(() => nc.close());
  await nc.topics.create('hb');
  const sub = nc.consume('hb', 'g', { maxInFlight: 10 });
  await sub.ready;
  await nc.publish('hb', 'before');
  const it = sub[Symbol.asyncIterator]();
  const first = (await it.next()).value;
  assert.equal(first.string(), 'before');
  // The link goes silent without closing: only the heartbeat can tell.
  proxy.blackhole();
  await waitFor(() => nc.reconnects >= 1 && nc.isConnected, { what: 'reconnect after a silent link' });
  assert.equal(proxy.state.connections, 2);
  // The old lease was released when the server dropped the old link (or it
  // expires); either way the consumer, re-subscribed, gets the message again.
  await nc.publish('hb', 'after');
  const seen = new Map();
  while (!seen.has('after') || !seen.has('before')) {
    const m = (await it.next()).value;
    seen.set(m.string(), m.deliveryCount);
    await m.ack();
  }
  assert.equal(seen.get('before'), 2);
});

test('a long fetch is not mistaken for a stale link', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url, pingIntervalMs: 50 });
  t.after(() => nc.close());
  await nc.topics.create('slow');
  const t0 = Date.now();
  const got = await nc.fetch('slow', 'g', { waitMs: 600 });
  assert.deepEqual(got, []);
  assert.ok(Date.now() - t0 >= 550, 'the server waited');
  assert.equal(nc.reconnects, 0, 'no reconnect while the poll held answers back');
});

test('a graceful server restart (SIGTERM, shutting_down) is ridden out too', async (t) => {
  let srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } });
  t.after(() => nc.close());
  await nc.topics.create('g');
  const ps = [];
  for (let i = 0; i < 200; i++) ps.push(nc.publish('g', `m-${i}`));
  const stopped = srv.stop();
  for (let i = 200; i < 300; i++) ps.push(nc.publish('g', `m-${i}`));
  await stopped;
  srv = await startServer(t, { port: srv.port, dataDir: srv.dataDir });
  const res = await Promise.allSettled(ps);
  assert.deepEqual(res.filter((r) => r.status === 'rejected').map((r) => r.reason?.code), []);
  const stored = new Set();
  for (;;) {
    const batch = await nc.fetch('g', 'check', { max: 500, waitMs: 500 });
    if (batch.length === 0) break;
    for (const m of batch) stored.add(m.string());
    await nc.ackAll(batch);
  }
  for (let i = 0; i < 300; i++) assert.ok(stored.has(`m-${i}`), `m-${i} lost`);
});
