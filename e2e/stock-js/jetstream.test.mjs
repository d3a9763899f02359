// nats.js 2.29 JetStream (jetstreamManager, jetstream, consumers.get,
// fetch, consume, acks) against fibril serve and, as the control,
// nats-server with JetStream (SPEC.md 16.2, issue 28).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AckPolicy, connect, RetentionPolicy, StringCodec } from 'nats';
import { bothJS } from './servers.mjs';

const sc = StringCodec();
const WAIT = 5000;

async function open(t, srv) {
  const nc = await connect({ servers: srv.url, reconnect: false, timeout: WAIT });
  t.after(() => nc.close());
  return nc;
}

test('streams: add, info, list, publish acks, get, purge, delete', (t) => bothJS(t, async (st, srv) => {
  const nc = await open(st, srv);
  const jsm = await nc.jetstreamManager();
  const si = await jsm.streams.add({ name: 'ORDERS', subjects: ['orders.>'], retention: RetentionPolicy.Workqueue });
  assert.equal(si.config.name, 'ORDERS');
  const js = nc.jetstream();
  for (let i = 1; i <= 3; i++) {
    const ack = await js.publish(`orders.${i}`, sc.encode(`o${i}`));
    assert.equal(ack.stream, 'ORDERS');
    assert.equal(ack.seq, i);
  }
  const info = await jsm.streams.info('ORDERS');
  assert.equal(info.state.messages, 3);
  assert.equal(info.state.last_seq, 3);
  const m = await jsm.streams.getMessage('ORDERS', { seq: 2 });
  assert.equal(m.subject, 'orders.2');
  assert.equal(sc.decode(m.data), 'o2');
  const names = [];
  for await (const n of jsm.streams.names()) names.push(n);
  assert.deepEqual(names, ['ORDERS']);
  const purged = await jsm.streams.purge('ORDERS');
  assert.equal(purged.purged, 3);
  assert.equal(await jsm.streams.delete('ORDERS'), true);
  await assert.rejects(jsm.streams.info('ORDERS'), /stream not found/);
}));

test('pull consumers: fetch, metadata, ack, nak, term, working, double ack, consume', (t) => bothJS(t, async (st, srv) => {
  const nc = await open(st, srv);
  const jsm = await nc.jetstreamManager();
  await jsm.streams.add({ name: 'WORK', subjects: ['work.>'], retention: RetentionPolicy.Workqueue });
  const js = nc.jetstream();
  for (let i = 1; i <= 4; i++) await js.publish('work.item', sc.encode(String(i)));
  const ci = await jsm.consumers.add('WORK', { durable_name: 'w', ack_policy: AckPolicy.Explicit, ack_wait: 2_000_000_000 });
  assert.equal(ci.name, 'w');
  const c = await js.consumers.get('WORK', 'w');
  const got = [];
  for await (const m of await c.fetch({ max_messages: 4, expires: 2000 })) got.push(m);
  assert.equal(got.length, 4);
  got.forEach((m, i) => {
    assert.equal(m.info.stream, 'WORK');
    assert.equal(m.info.consumer, 'w');
    assert.equal(m.info.streamSequence, i + 1);
    assert.equal(m.info.deliverySequence, i + 1);
    assert.equal(m.info.redeliveryCount, 1);
  });
  got[0].ack();
  assert.equal(await got[1].ackAck(), true);
  got[2].nak();
  got[3].working();
  got[3].term();
  const again = [];
  for await (const m of await c.fetch({ max_messages: 4, expires: 1500 })) { again.push(m.info.streamSequence); m.ack(); }
  assert.deepEqual(again, [3]);
  for (let i = 0; i < 20; i++) await js.publish('work.item', sc.encode('c'));
  const msgs = await c.consume({ max_messages: 5 });
  let n = 0;
  for await (const m of msgs) { m.ack(); if (++n === 20) break; }
  const info = await jsm.consumers.info('WORK', 'w');
  assert.equal(info.num_pending, 0);
  assert.equal(await jsm.consumers.delete('WORK', 'w'), true);
}));

test('publish: msgID duplicates and expect lastMsgID', (t) => bothJS(t, async (st, srv) => {
  const nc = await open(st, srv);
  const jsm = await nc.jetstreamManager();
  const si = await jsm.streams.add({ name: 'DEDUP', subjects: ['dedup.>'], duplicate_window: 60e9 });
  assert.equal(si.config.duplicate_window, 60e9);
  const js = nc.jetstream();
  const a = await js.publish('dedup.x', sc.encode('a'), { msgID: 'a' });
  const again = await js.publish('dedup.x', sc.encode('a again'), { msgID: 'a' });
  assert.equal(a.seq, 1);
  assert.equal(a.duplicate, false);
  assert.equal(again.seq, 1);
  assert.equal(again.duplicate, true);
  await assert.rejects(js.publish('dedup.x', sc.encode('b'), { msgID: 'b', expect: { lastMsgID: 'zzz' } }), /wrong last msg id: a/i);
  const b = await js.publish('dedup.x', sc.encode('b'), { msgID: 'b', expect: { lastMsgID: 'a' } });
  assert.equal(b.seq, 2);
  assert.equal(b.duplicate, false);
  assert.equal((await jsm.streams.info('DEDUP')).state.messages, 2);
}));
