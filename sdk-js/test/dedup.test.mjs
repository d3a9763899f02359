// Publish de-duplication against the real server (SPEC.md 7.5, 10.1): a
// repeated msgId is confirmed with the first one's Position, duplicate set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from '../dist/index.js';
import { startServer } from './helpers/server.mjs';

test('publish: a repeated msgId is a duplicate of the first', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url, name: 'dedup-test' });
  t.after(() => nc.close());
  await nc.topics.create('orders', { partitions: 3 });
  const first = await nc.publish('orders', 'one', { msgId: 'order-7' });
  const again = await nc.publish('orders', 'one, retried', { msgId: 'order-7' });
  const other = await nc.publish('orders', 'two', { msgId: 'order-8' });
  assert.equal(first.duplicate, false);
  assert.deepEqual(again, { partition: first.partition, seq: first.seq, duplicate: true });
  assert.equal(other.duplicate, false);
  assert.equal((await nc.topics.info('orders')).msgs, 2);

  const off = await nc.topics.create('plain', { duplicateWindowMs: 0 });
  assert.equal(off.config.duplicate_window_ms, 0);
  const a = await nc.publish('plain', 'x', { msgId: 'same' });
  const b = await nc.publish('plain', 'x', { msgId: 'same' });
  assert.equal(b.duplicate, false);
  assert.equal(b.seq, a.seq + 1n);
});
