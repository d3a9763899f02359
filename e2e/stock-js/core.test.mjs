// nats.js 2.29 (the npm package nats, a dev dependency of this folder)
// against fibril serve and nats-server: the NATS core features and the
// cases of issue 24 (no responders, empty header sets, TLS advertising);
// JetStream is jetstream.test.mjs.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { connect, headers, ErrorCode, StringCodec } from 'nats';
import { both, startFibril } from './servers.mjs';

const sc = StringCodec();
const WAIT = 5000; // far longer than any answer may take

async function open(t, srv, opts = {}) {
  const nc = await connect({ servers: srv.url, reconnect: false, timeout: WAIT, ...opts });
  t.after(() => nc.close());
  return nc;
}

// inbox subscribes with a callback and hands out messages in order.
function inbox(nc, subject, opts = {}) {
  const got = [];
  const waiters = [];
  const sub = nc.subscribe(subject, { ...opts, callback: (_e, m) => (waiters.length ? waiters.shift()(m) : got.push(m)) });
  sub.next = () => (got.length ? Promise.resolve(got.shift()) : new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no message on ${subject}`)), WAIT);
    waiters.push((m) => { clearTimeout(timer); resolve(m); });
  }));
  return sub;
}

test('pub/sub with wildcards and queue groups', (t) => both(t, async (st, srv) => {
  const nc = await open(st, srv);
  const star = inbox(nc, 'w.*');
  const gt = inbox(nc, 'w.>');
  const q1 = inbox(nc, 'q.jobs', { queue: 'workers' });
  const q2 = inbox(nc, 'q.jobs', { queue: 'workers' });
  await nc.flush();
  nc.publish('w.a', sc.encode('1'));
  nc.publish('w.a.b', sc.encode('2'));
  assert.equal((await star.next()).subject, 'w.a');
  assert.equal((await gt.next()).subject, 'w.a');
  assert.equal((await gt.next()).subject, 'w.a.b');
  for (let i = 0; i < 100; i++) nc.publish('q.jobs', sc.encode(String(i)));
  await nc.flush();
  for (let i = 0; i < 500 && q1.getReceived() + q2.getReceived() < 100; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(q1.getReceived() + q2.getReceived(), 100);
}));

test('request/reply, and the no-responders status at once', (t) => both(t, async (st, srv) => {
  const nc = await open(st, srv);
  nc.subscribe('svc.echo', { callback: (_e, m) => m.respond(m.data) });
  await nc.flush();
  assert.equal(sc.decode((await nc.request('svc.echo', sc.encode('x'), { timeout: WAIT })).data), 'x');
  await assert.rejects(nc.request('svc.nobody', sc.encode('x'), { timeout: WAIT }),
    (e) => e.code === ErrorCode.NoResponders);
}));

test('headers, and an empty header set (HPUB s 0 n) is delivered', (t) => both(t, async (st, srv) => {
  const nc = await open(st, srv);
  const sub = inbox(nc, 'h.x');
  await nc.flush();
  const h = headers();
  h.set('X-Trace', 'abc');
  nc.publish('h.x', sc.encode('with'), { headers: h });
  const m = await sub.next();
  assert.equal(m.headers?.get('X-Trace'), 'abc');
  nc.publish('h.x', sc.encode('empty'), { headers: headers() });
  assert.equal(sc.decode((await sub.next()).data), 'empty');
  await nc.flush(); // the connection is still up
}));

test('a plain connection to a server with a TLS listener does not try TLS', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'fibril-stock-js-tls-'));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
      '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
  } catch {
    t.skip('openssl not available');
    return;
  }
  const srv = await startFibril(t, '--tls-listen', '127.0.0.1:0', '--tls-cert', join(dir, 'cert.pem'), '--tls-key', join(dir, 'key.pem'));
  const nc = await open(t, srv);
  const sub = inbox(nc, 'plain');
  nc.publish('plain', sc.encode('ok'));
  assert.equal(sc.decode((await sub.next()).data), 'ok');
});
