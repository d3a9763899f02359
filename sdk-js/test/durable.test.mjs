// Durable topics and groups against the real server: publish confirms,
// fetch, consume, ack/nack/reject/inProgress, dead letters, management.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, InvalidConfigError, InvalidHeaderError, StaleHandleError, TopicExistsError, UnknownTopicError } from '../dist/index.js';
import { startServer, waitFor } from './helpers/server.mjs';

async function setup(t, args = []) {
  const srv = await startServer(t, { args });
  if (!srv) return {};
  const nc = await connect({ servers: srv.url, name: 'durable-test' });
  t.after(() => nc.close());
  return { srv, nc };
}

test('management: topics and groups', async (t) => {
  const { nc } = await setup(t);
  if (!nc) return;
  const ti = await nc.topics.create('orders', { partitions: 2, durability: 'sync' });
  assert.equal(ti.name, 'orders');
  assert.equal(ti.config.partitions, 2);
  await assert.rejects(nc.topics.create('orders', { partitions: 3 }), TopicExistsError);
  // replicas: a single node holds each partition once
  assert.equal((await nc.topics.create('orders.r1', { subjects: ['r1'], replicas: 1 })).config.replicas, 1);
  await assert.rejects(nc.topics.create('orders.r3', { subjects: ['r3'], replicas: 3 }), (e) => e.code === 'invalid_config');
  const gi = await nc.groups.create('orders', 'billing', { leaseMs: 5000, maxDeliveries: 3 });
  assert.equal(gi.name, 'billing');
  assert.equal(gi.config.max_deliveries, 3);
  assert.deepEqual((await nc.groups.list('orders')).groups, ['billing']);
  assert.equal((await nc.groups.info('orders', 'billing')).pending, 0);
  assert.ok((await nc.topics.list()).topics.includes('orders'));
  await nc.groups.delete('orders', 'billing');
  assert.deepEqual((await nc.groups.list('orders')).groups, []);
  await nc.topics.delete('orders');
  await assert.rejects(nc.topics.info('orders'), UnknownTopicError);
  await assert.rejects(nc.topics.create('bad name'), (e) => e.code === 'invalid_subject');
});

test('management: topic compression is set at creation and shown in info', async (t) => {
  const { nc } = await setup(t);
  if (!nc) return;
  const ti = await nc.topics.create('archive', { retention: 'limits', compression: 's2' });
  assert.equal(ti.config.compression, 's2');
  assert.equal((await nc.topics.info('archive')).config.compression, 's2');
  await nc.topics.create('archive', { retention: 'limits', compression: 's2' }); // same: idempotent
  await assert.rejects(nc.topics.create('archive', { retention: 'limits', compression: 'zstd' }), TopicExistsError);
  await assert.rejects(nc.topics.create('bad', { compression: 'lz4' }), InvalidConfigError);
  assert.equal((await nc.topics.create('plain')).config.compression, 'none');
  await nc.publish('archive', '{"order":1}');
  const got = await nc.fetch('archive', 'g', { max: 1, waitMs: 5000 });
  assert.deepEqual(got.map((m) => m.string()), ['{"order":1}']);
  const [m] = got;
  await m.ack();
});

test('publish: confirms with positions, many in flight within max_unconfirmed', async (t) => {
  const { nc } = await setup(t, ['-max-unconfirmed', '8']);
  if (!nc) return;
  await nc.topics.create('jobs', { partitions: 3 });
  assert.equal(nc.maxUnconfirmed, 8);
  let peak = 0;
  const n = 300;
  const ps = [];
  for (let i = 0; i < n; i++) {
    ps.push(nc.publish('jobs', `job-${i}`, { key: `k${i % 7}`, msgId: `id-${i}` }));
    peak = Math.max(peak, nc.unconfirmed);
  }
  const positions = await Promise.all(ps);
  assert.ok(peak <= 8 + (n - 8), 'sanity');
  assert.ok(nc.unconfirmed === 0);
  const seen = new Set();
  for (const p of positions) {
    assert.ok(p.partition >= 0 && p.partition < 3);
    assert.equal(typeof p.seq, 'bigint');
    const k = `${p.partition}:${p.seq}`;
    assert.ok(!seen.has(k), `duplicate position ${k}`);
    seen.add(k);
  }
  // The same key always lands in the same partition.
  const byKey = new Map();
  positions.forEach((p, i) => {
    const k = `k${i % 7}`;
    if (byKey.has(k)) assert.equal(byKey.get(k), p.partition, k);
    byKey.set(k, p.partition);
  });
  const info = await nc.topics.info('jobs');
  assert.equal(info.msgs, n);
});

test('publish: the window is enforced client side (never a max_unconfirmed error)', async (t) => {
  const { nc } = await setup(t, ['-max-unconfirmed', '2']);
  if (!nc) return;
  await nc.topics.create('w');
  let max = 0;
  const ps = Array.from({ length: 50 }, (_, i) => nc.publish('w', String(i)).then((p) => {
    max = Math.max(max, nc.unconfirmed);
    return p;
  }));
  const res = await Promise.all(ps);
  assert.equal(res.length, 50);
  assert.ok(max <= 2, `unconfirmed reached ${max}`);
  // Confirms come in publish order, so seqs increase.
  for (let i = 1; i < res.length; i++) assert.ok(res[i].seq > res[i - 1].seq);
});

test('fetch, ack, nack with delay, stale handle, reject to the dead-letter topic', async (t) => {
  const { nc } = await setup(t);
  if (!nc) return;
  await nc.topics.create('orders');
  await nc.groups.create('orders', 'billing', { maxDeliveries: 5 });
  await nc.publish('orders', 'a', { headers: { 'X-Kind': 'first' } });
  await nc.publish('orders', 'b');
  await nc.publish('orders', 'c');
  const batch = await nc.fetch('orders', 'billing', { max: 10 });
  assert.deepEqual(batch.map((m) => m.string()), ['a', 'b', 'c']);
  const [a, b, c] = batch;
  assert.equal(a.deliveryCount, 1);
  assert.equal(a.headers.get('X-Kind'), 'first');
  assert.equal(a.partition, 0);
  assert.equal(a.seq, 1n);
  assert.ok(a.crc !== undefined);
  await a.ack();
  await a.ack(); // idempotent
  await c.inProgress({ extendMs: 60000 });
  await b.nack({ delayMs: 50 });
  const again = await nc.fetch('orders', 'billing', { max: 10, waitMs: 5000 });
  assert.equal(again.length, 1);
  assert.equal(again[0].string(), 'b');
  assert.equal(again[0].deliveryCount, 2);
  await assert.rejects(b.ack(), (e) => e instanceof StaleHandleError && e.code === 'stale_handle');
  await again[0].reject();
  await c.ack();
  assert.deepEqual(await nc.fetch('orders', 'billing', { max: 10 }), []);
  const dl = await nc.fetch('$DLQ.orders.billing', 'ops', { max: 1, waitMs: 5000 });
  assert.equal(dl.length, 1);
  assert.equal(dl[0].string(), 'b');
  assert.equal(dl[0].headers.get('Fibril-Reason'), 'rejected');
  assert.equal(dl[0].headers.get('Fibril-Subject'), 'orders');
  assert.equal(dl[0].headers.get('Fibril-Seq'), '2');
  await dl[0].ack();
});

test('max_deliveries dead-letters a message nacked too often', async (t) => {
  const { nc } = await setup(t);
  if (!nc) return;
  await nc.topics.create('flaky');
  await nc.groups.create('flaky', 'w', { maxDeliveries: 2 });
  await nc.publish('flaky', 'boom');
  const [m1] = await nc.fetch('flaky', 'w', { waitMs: 5000 });
  await m1.nack();
  const [m2] = await nc.fetch('flaky', 'w', { waitMs: 5000 });
  assert.equal(m2.deliveryCount, 2);
  await m2.nack();
  assert.deepEqual(await nc.fetch('flaky', 'w'), []);
  const [d] = await nc.fetch('$DLQ.flaky.w', 'ops', { waitMs: 5000 });
  assert.equal(d.headers.get('Fibril-Reason'), 'max_deliveries');
  assert.equal(d.headers.get('Fibril-Deliveries'), '2');
  await d.ack();
});

test('an ordered group hands out one message at a time, a NACKed one first again', async (t) => {
  const { nc } = await setup(t);
  if (!nc) return;
  await nc.topics.create('fifo');
  const gi = await nc.groups.create('fifo', 'w', { ordered: 'partition' });
  assert.equal(gi.config.ordered, 'partition');
  await nc.publish('fifo', 'a');
  await nc.publish('fifo', 'b');
  const [m1, ...more] = await nc.fetch('fifo', 'w', { max: 10, waitMs: 5000 });
  assert.equal(m1.string(), 'a');
  assert.equal(more.length, 0);
  assert.deepEqual(await nc.fetch('fifo', 'w', { max: 10 }), []);
  await m1.nack();
  const [m2] = await nc.fetch('fifo', 'w', { max: 10, waitMs: 5000 });
  assert.equal(m2.string(), 'a');
  assert.equal(m2.deliveryCount, 2);
  await m2.ack();
  const [m3] = await nc.fetch('fifo', 'w', { max: 10, waitMs: 5000 });
  assert.equal(m3.string(), 'b');
  await assert.rejects(nc.groups.create('fifo', 'bad', { ordered: 'message' }), InvalidConfigError);
});

test('a group ordered by key hands out one message per key at a time, keys in parallel', async (t) => {
  const { nc } = await setup(t);
  if (!nc) return;
  await nc.topics.create('bykey');
  const gi = await nc.groups.create('bykey', 'w', { ordered: 'key' });
  assert.equal(gi.config.ordered, 'key');
  await nc.publish('bykey', 'a1', { key: 'a' });
  await nc.publish('bykey', 'a2', { key: 'a' });
  await nc.publish('bykey', 'b1', { key: 'b' });
  const ms = await nc.fetch('bykey', 'w', { max: 10, waitMs: 5000 });
  assert.deepEqual(ms.map((m) => m.string()), ['a1', 'b1']);
  await ms[0].nack();
  const [m2] = await nc.fetch('bykey', 'w', { max: 10, waitMs: 5000 });
  assert.equal(m2.string(), 'a1');
  assert.equal(m2.deliveryCount, 2);
  await m2.ack();
  const [m3] = await nc.fetch('bykey', 'w', { max: 10, waitMs: 5000 });
  assert.equal(m3.string(), 'a2');
});

test('topics.requeue moves the dead letters a filter picks, then the rest', async (t) => {
  const { nc } = await setup(t);
  if (!nc) return;
  await nc.topics.create('rq', { subjects: ['rq.>'] });
  await nc.groups.create('rq', 'w');
  await nc.publish('rq.eu', 'eu');
  await nc.publish('rq.us', 'us');
  for (let n = 0; n < 2; ) {
    for (const m of await nc.fetch('rq', 'w', { max: 2, waitMs: 5000 })) {
      await m.reject();
      n++;
    }
  }
  await waitFor(async () => (await nc.topics.info('$DLQ.rq.w')).msgs === 2);
  assert.equal((await nc.topics.requeue('$DLQ.rq.w', { filter: ['rq.eu'] })).requeued, 1);
  const [m1] = await nc.fetch('rq', 'w', { waitMs: 5000 });
  assert.equal(m1.string(), 'eu');
  await m1.ack();
  assert.equal((await nc.topics.requeue('$DLQ.rq.w')).requeued, 1);
  const [m2] = await nc.fetch('rq', 'w', { waitMs: 5000 });
  assert.equal(m2.string(), 'us');
  await assert.rejects(nc.topics.requeue('$DLQ.rq.w', { max: 0 }), InvalidConfigError);
});

test('publish ttlMs: past it the group dead-letters the message (onExpiry), Fibril-Reason expired', async (t) => {
  const { nc } = await setup(t);
  if (!nc) return;
  await nc.topics.create('ttl', { allowMsgTtl: true });
  const gi = await nc.groups.create('ttl', 'w', { onExpiry: 'dead_letter' });
  assert.equal(gi.config.on_expiry, 'dead_letter');
  await nc.publish('ttl', 'short', { ttlMs: 1 });
  await nc.publish('ttl', 'long', { ttlMs: 3600_000 });
  await new Promise((r) => setTimeout(r, 20)); // past the short one's TTL
  const got = await nc.fetch('ttl', 'w', { max: 10, waitMs: 1000 });
  assert.deepEqual(got.map((m) => m.string()), ['long']);
  const [d] = await nc.fetch('$DLQ.ttl.w', 'ops', { waitMs: 5000 });
  assert.equal(d.string(), 'short');
  assert.equal(d.headers.get('Fibril-Reason'), 'expired');
  await nc.topics.create('ttlplain', { messageTtlMs: 60000 });
  assert.equal((await nc.topics.info('ttlplain')).config.message_ttl_ms, 60000);
  await assert.rejects(nc.publish('ttlplain', 'x', { ttlMs: 5000 }), InvalidHeaderError);
  await assert.rejects(nc.publish('ttl', 'x', { ttlMs: 0 }), /a TTL is more than 0/);
});

test('publish delayMs and deliverAt hold a message back; the ones after it flow on', async (t) => {
  const { nc } = await setup(t);
  if (!nc) return;
  await nc.topics.create('later', { allowMsgDelay: true });
  await nc.publish('later', 'in an hour', { delayMs: 3600_000 });
  await nc.publish('later', 'tomorrow', { deliverAt: new Date(Date.now() + 86400_000) });
  await nc.publish('later', 'soon', { delayMs: 50 });
  await nc.publish('later', 'now');
  assert.deepEqual((await nc.fetch('later', 'w', { max: 10 })).map((m) => m.string()), ['now']);
  assert.deepEqual((await nc.fetch('later', 'w', { max: 10, waitMs: 5000 })).map((m) => m.string()), ['soon']);
  await nc.topics.create('laterplain');
  await assert.rejects(nc.publish('laterplain', 'x', { delayMs: 5000 }), InvalidHeaderError);
  await assert.rejects(nc.publish('later', 'x', { delayMs: -1 }), /a delay is more than 0/);
});

test('consume: push delivery bounded by maxInFlight, ack, abort ends the loop', async (t) => {
  const { nc } = await setup(t);
  if (!nc) return;
  await nc.topics.create('events');
  const n = 60;
  await Promise.all(Array.from({ length: n }, (_, i) => nc.publish('events', String(i))));
  const ac = new AbortController();
  const sub = nc.consume('events', 'audit', { maxInFlight: 4, signal: ac.signal });
  await sub.ready;
  let acked = 0;
  let maxOutstanding = 0;
  const seen = new Set();
  const acks = [];
  for await (const m of sub) {
    maxOutstanding = Math.max(maxOutstanding, sub.received - acked);
    seen.add(m.string());
    // Settle a little later, so unsettled deliveries pile up to the credit.
    // Count an ack when it is sent: the server may deliver the next message
    // before its +OK reaches us.
    acks.push(new Promise((r) => setImmediate(r)).then(() => {
      acked++;
      return m.ack();
    }));
    if (seen.size === n) ac.abort();
  }
  await Promise.all(acks);
  assert.equal(seen.size, n);
  assert.ok(maxOutstanding <= 4, `outstanding reached ${maxOutstanding}`);
  assert.equal(sub.closed, true);
  // GROUP INFO may trail the +OKs by a moment: poll until everything is settled.
  await waitFor(async () => {
    const gi = await nc.groups.info('events', 'audit');
    return gi.pending + gi.inflight === 0;
  }, { what: 'group audit fully settled' });
});

test('fetch: an aborted long poll rejects at once with the signal reason', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  // close() waits for the abandoned POLL's answer at most timeoutMs.
  const nc = await connect({ servers: srv.url, timeoutMs: 500 });
  t.after(() => nc.close());
  await nc.topics.create('idle');
  const ac = new AbortController();
  const p = nc.fetch('idle', 'g', { waitMs: 60000, signal: ac.signal });
  const started = Date.now();
  setTimeout(() => ac.abort(new Error('enough')), 50);
  await assert.rejects(p, /enough/);
  assert.ok(Date.now() - started < 5000);
  const ac2 = new AbortController();
  ac2.abort();
  await assert.rejects(nc.publish('idle', 'x', { signal: ac2.signal }), (e) => e.name === 'AbortError');
});

test('Symbol.asyncDispose closes the connection; closed() resolves', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url });
  await nc.topics.create('d');
  const p = nc.publish('d', 'x');
  await nc[Symbol.asyncDispose]();
  assert.ok((await p).seq >= 1n, 'a publish sent before close is confirmed');
  assert.equal(await nc.closed(), undefined);
  assert.equal(nc.isClosed, true);
});

test('a lost connection releases its leases: another connection gets the message', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const a = await connect({ servers: srv.url });
  const b = await connect({ servers: srv.url });
  t.after(() => b.close());
  await a.topics.create('lease');
  await a.publish('lease', 'x');
  const [m] = await a.fetch('lease', 'g', { waitMs: 5000 });
  assert.equal(m.deliveryCount, 1);
  await a.close();
  const got = await waitFor(async () => (await b.fetch('lease', 'g', { waitMs: 1000 }))[0], { what: 'redelivery' });
  assert.equal(got.string(), 'x');
  assert.equal(got.deliveryCount, 2);
  await got.ack();
});

test('ackAll splits long ACK lines at the control-line limit', async (t) => {
  const { nc } = await setup(t);
  if (!nc) return;
  await nc.topics.create('many');
  const n = 400;
  await Promise.all(Array.from({ length: n }, (_, i) => nc.publish('many', String(i))));
  const got = [];
  while (got.length < n) got.push(...(await nc.fetch('many', 'g', { max: n, waitMs: 2000 })));
  const bytes = got.reduce((a, m) => a + m.reply.length + 1, 4);
  assert.ok(bytes > 4096, `${bytes} bytes of handles fit one line; the test needs more`);
  await nc.ackAll(got); // more handles than one 4096-byte line holds
  await waitFor(async () => {
    const gi = await nc.groups.info('many', 'g');
    return gi.pending + gi.inflight === 0;
  }, { what: 'all acked' });
});
