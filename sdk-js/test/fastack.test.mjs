// Fast acks and one set of units (issue 33): acks coalesced per burst, each
// promise its own outcome, Msg.settled only once the server answered,
// Subscription.run, ms-with-camelCase options (old names still work),
// existOk, and a plain NATS server refused for good.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { connect, GroupExistsError, NotFibrilError, StaleHandleError, TopicExistsError } from '../dist/index.js';
import { startServer, waitFor } from './helpers/server.mjs';

// countingProxy relays to port and counts the ACK lines the client sends.
async function countingProxy(t, port) {
  const stats = { acks: 0 };
  let tail = '';
  const server = net.createServer((client) => {
    const up = net.connect(port, '127.0.0.1');
    client.on('data', (d) => {
      const s = tail + d.toString('latin1');
      stats.acks += s.split('\nACK ').length - 1 + (s.startsWith('ACK ') && tail === '' ? 1 : 0);
      tail = s.slice(-8);
      up.write(d);
    });
    up.on('data', (d) => client.write(d));
    for (const [a, b] of [[client, up], [up, client]]) {
      a.on('error', () => b.destroy());
      a.on('close', () => b.destroy());
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  return { url: `nats://127.0.0.1:${server.address().port}`, stats };
}

async function backlog(nc, topic, n, leaseMs = 600000) {
  await nc.topics.create(topic, { partitions: 1 });
  await nc.groups.create(topic, 'g', { leaseMs });
  await Promise.all(Array.from({ length: n }, (_, i) => nc.publish(topic, String(i))));
}

async function counts(nc, topic) {
  const gi = await nc.groups.info(topic, 'g');
  return [gi.pending, gi.inflight];
}

test('acks of a burst share ACK lines; settled turns true when the server answered', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const p = await countingProxy(t, srv.port);
  const nc = await connect({ servers: p.url });
  t.after(() => nc.close());
  await backlog(nc, 'burst', 300);
  const msgs = await nc.fetch('burst', 'g', { max: 300, waitMs: 2000 });
  assert.equal(msgs.length, 300);
  const before = p.stats.acks;
  const acks = msgs.map((m) => m.ack());
  assert.ok(msgs.every((m) => m.settling && !m.settled), 'settled before the answer');
  await Promise.all(acks);
  assert.ok(msgs.every((m) => m.settled));
  const lines = p.stats.acks - before;
  assert.ok(lines >= 1 && lines <= 10, `${lines} ACK lines for 300 acks`);
  assert.deepEqual(await counts(nc, 'burst'), [0, 0]);
});

test('in a shared ACK line only the stale handle fails', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url });
  t.after(() => nc.close());
  await backlog(nc, 'stale', 3);
  const msgs = await nc.fetch('stale', 'g', { max: 3, waitMs: 2000 });
  await msgs[1].nack();
  const [again] = await nc.fetch('stale', 'g', { waitMs: 2000 });
  const res = await Promise.allSettled(msgs.map((m) => m.ack()));
  assert.equal(res[0].status, 'fulfilled');
  assert.equal(res[2].status, 'fulfilled');
  assert.ok(res[1].reason instanceof StaleHandleError, String(res[1].reason));
  await again.ack();
});

test('run acks on return, nacks on throw, and close hands the backlog back', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url });
  t.after(() => nc.close());
  await backlog(nc, 'run', 20);
  const seen = [];
  const errors = [];
  const sub = nc.consume('run', 'g');
  await sub.run(
    (m) => {
      seen.push([m.string(), m.deliveryCount]);
      if (m.string() === '7' && m.deliveryCount === 1) throw new Error('first try fails');
      if (seen.length === 21) sub.close();
    },
    { concurrency: 3, nackDelayMs: 10, onError: (e) => errors.push(e) },
  );
  assert.deepEqual(seen.filter(([, n]) => n === 1).map(([d]) => Number(d)).sort((a, b) => a - b), [...Array(20).keys()]);
  assert.ok(seen.some(([d, n]) => d === '7' && n === 2));
  assert.deepEqual(errors.map((e) => e.message), ['first try fails']);
  await waitFor(async () => (await counts(nc, 'run')).join() === '0,0', { what: 'every message settled' });

  await backlog(nc, 'stop', 500);
  let done = 0;
  const s2 = nc.consume('stop', 'g', { maxInFlight: 200 });
  await s2.run(async () => {
    if (++done === 5) {
      await new Promise((r) => setTimeout(r, 100)); // the client's buffer fills meanwhile
      s2.close();
    }
  });
  assert.equal(done, 5);
  await waitFor(async () => (await counts(nc, 'stop')).join() === '495,0', { what: 'the backlog handed back' });
});

test('units: ms with camelCase, the old snake_case names still work; existOk', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url });
  t.after(() => nc.close());
  const ti = await nc.topics.create('units', { retention: 'limits', maxAgeMs: 3600000, maxMsgs: 10 });
  assert.equal(ti.config.max_age_ms, 3600000);
  assert.equal(ti.config.max_msgs, 10);
  const a = await nc.groups.create('units', 'a', { leaseMs: 30000, maxDeliveries: 4 });
  assert.equal(a.config.lease_ms, 30000);
  assert.equal(a.config.max_deliveries, 4);
  const b = await nc.groups.create('units', 'b', { lease_ms: 1500, max_deliveries: 2 }); // deprecated names
  assert.equal(b.config.lease_ms, 1500);
  await assert.rejects(nc.topics.create('units', { partitions: 3 }), TopicExistsError);
  assert.equal((await nc.topics.create('units', { partitions: 3 }, { existOk: true })).name, 'units');
  await assert.rejects(nc.groups.create('units', 'a', { maxDeliveries: 9 }), GroupExistsError);
  assert.equal((await nc.groups.create('units', 'a', { maxDeliveries: 9 }, { existOk: true })).config.max_deliveries, 4);

  await nc.publish('units', 'x');
  const [m] = await nc.fetch('units', 'a', { waitMs: 2000 });
  await m.inProgress({ extendMs: 60000 });
  await m.nack({ delayMs: 20 });
  const [again] = await nc.fetch('units', 'a', { wait: 2000 }); // deprecated name
  assert.equal(again.deliveryCount, 2);
  await assert.rejects(again.ack({ signal: AbortSignal.abort() }), { name: 'AbortError' }); // stops waiting only
  await waitFor(() => again.settled, { what: 'the abandoned ack answered all the same' });
  await again.ack();
});

test('a plain NATS server is refused for good: NotFibrilError, not retriable', async (t) => {
  const server = net.createServer((s) => {
    s.write('INFO {"server_id":"plain","version":"2.10.0","proto":1,"max_payload":1048576}\r\n');
    s.on('error', () => {});
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  const err = await connect({ servers: `nats://127.0.0.1:${server.address().port}` }).then(
    () => assert.fail('connected to a plain NATS server'),
    (e) => e,
  );
  assert.ok(err instanceof NotFibrilError, String(err));
  assert.equal(err.code, 'not_fibril');
  assert.equal(err.retriable, false);
});
