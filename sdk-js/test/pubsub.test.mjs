// Plain publish/subscribe against the real server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, FibrilError, InvalidArgumentError, ConnectionClosedError, MsgHeaders } from '../dist/index.js';
import { startServer } from './helpers/server.mjs';

test('plain pub/sub: connect, subscribe, publish, headers, close', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url, name: 'sdkjs-test' });
  assert.equal(nc.info.fibril, 1);
  assert.ok(nc.maxUnconfirmed > 0);
  const sub = nc.subscribe('_INBOX.sdkjs.>');
  await sub.ready;
  const pos = await nc.publish('_INBOX.sdkjs.a', 'one');
  assert.equal(pos, null, 'an inbox subject is not stored');
  await nc.publish('_INBOX.sdkjs.b', new Uint8Array([0, 1, 2, 255]), { headers: { 'X-Test': ['a', 'b'] } });
  const got = [];
  for await (const m of sub) {
    got.push(m);
    if (got.length === 2) break;
  }
  assert.equal(got[0].subject, '_INBOX.sdkjs.a');
  assert.equal(got[0].string(), 'one');
  assert.equal(got[0].durable, false);
  assert.equal(got[0].deliveryCount, 1);
  assert.ok(got[0].crc !== undefined, 'the server sent a verified checksum');
  assert.deepEqual([...got[1].data], [0, 1, 2, 255]);
  assert.ok(got[1].headers instanceof MsgHeaders);
  assert.deepEqual(got[1].headers.getAll('x-test'), ['a', 'b']);
  await assert.rejects(got[0].ack(), (e) => e.code === 'not_durable');
  assert.equal(sub.closed, true, 'breaking out of the loop unsubscribes');
  const sub2 = nc.subscribe('_INBOX.sdkjs.dispose');
  await sub2.ready;
  await sub2[Symbol.asyncDispose]();
  assert.equal(sub2.closed, true);
  assert.deepEqual(await sub2.next(), { value: undefined, done: true });
  await nc.flush();
  await nc.close();
  assert.equal(await nc.closed(), undefined);
  await assert.rejects(nc.publish('_INBOX.x', 'late'), ConnectionClosedError);
});

test('plain pub/sub works with crc off too, and queue groups share messages', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url, crc: false });
  t.after(() => nc.close());
  const a = nc.subscribe('_INBOX.q', { queue: 'workers' });
  const b = nc.subscribe('_INBOX.q', { queue: 'workers' });
  await Promise.all([a.ready, b.ready]);
  await Promise.all(Array.from({ length: 20 }, (_, i) => nc.publish('_INBOX.q', String(i))));
  await nc.flush();
  const seen = new Set();
  const drain = async (s) => {
    for await (const m of s) {
      assert.equal(m.crc, undefined);
      seen.add(m.string());
      if (seen.size === 20) break;
    }
  };
  await Promise.race([drain(a), drain(b)]);
  assert.equal(seen.size, 20);
  assert.equal(a.received + b.received, 20, 'each message went to one member of the queue group');
});

test('errors: typed by code, not by text', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const nc = await connect({ servers: srv.url });
  t.after(() => nc.close());
  // Client-side validation: nothing is sent.
  await assert.rejects(nc.publish('bad subject', 'x'), (e) => e.code === 'invalid_subject');
  await assert.rejects(nc.publish('a.*', 'x'), (e) => e.code === 'wildcard_not_allowed');
  // Server refusals come back as the generated classes.
  await assert.rejects(nc.publish('$reserved.x', 'x'), (e) => e instanceof FibrilError && e.code === 'reserved_subject' && e.retriable === false);
  await assert.rejects(nc.fetch('no-such-topic', 'g'), (e) => e.code === 'unknown_topic');
  await assert.rejects(nc.topics.info('nope'), (e) => e.code === 'unknown_topic');
  // The connection is still usable after non-fatal errors.
  await nc.flush();
  assert.equal(await nc.publish('_INBOX.ok', 'x'), null);
});

test('connect failures: nothing listening, bad options', async (t) => {
  await assert.rejects(connect({ servers: '127.0.0.1:1', reconnect: false, timeoutMs: 2000 }), (e) => e.code === 'no_servers');
  await assert.rejects(connect({ servers: 'http://x' }), InvalidArgumentError);
  await assert.rejects(connect({ servers: [] }), InvalidArgumentError);
  const ac = new AbortController();
  ac.abort(new Error('stop'));
  await assert.rejects(connect({ servers: '127.0.0.1:1', signal: ac.signal }), /stop/);
});

test('token auth: wrong token is a typed fatal error, right token works', async (t) => {
  const srv = await startServer(t, { args: ['-token', 's3cret'] });
  if (!srv) return;
  await assert.rejects(connect({ servers: srv.url, token: 'wrong' }), (e) => e.code === 'auth_violation' && e.fatal === true);
  const nc = await connect({ servers: srv.url, token: 's3cret' });
  t.after(() => nc.close());
  await nc.flush();
});

test('a message above max_payload is refused before sending; the connection stays up', async (t) => {
  const srv = await startServer(t, { args: ['-max-payload', '1024'] });
  if (!srv) return;
  const nc = await connect({ servers: srv.url });
  t.after(() => nc.close());
  assert.equal(nc.info.max_payload, 1024);
  await assert.rejects(nc.publish('_INBOX.big', Buffer.alloc(1025)), (e) => e.code === 'max_payload');
  // Headers count too.
  await assert.rejects(nc.publish('_INBOX.big', Buffer.alloc(1000), { headers: { 'X-Pad': 'x'.repeat(100) } }), (e) => e.code === 'max_payload');
  assert.equal(await nc.publish('_INBOX.big', Buffer.alloc(1024)), null);
  assert.equal(nc.isConnected, true);
});
