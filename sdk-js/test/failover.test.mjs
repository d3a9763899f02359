// Several servers and failover (SPEC.md 11.1): the server list's order,
// discovery from INFO connect_urls, the resend order after a lost link and
// the not_leader resend. Real `fibril serve` processes where a server can
// do what is tested; a scripted peer (helpers/peer.mjs) where none can on
// demand yet (not_leader, confirms held back).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, NotLeaderError, parseServer } from '../dist/index.js';
import { MAX_SERVERS, ServerList } from '../dist/servers.js';
import { deadAddr, fakePeer } from './helpers/peer.mjs';
import { startServer, waitFor } from './helpers/server.mjs';

const NOT_LEADER = "-ERR 'not_leader this node does not serve the partition'";
const quick = { initialDelayMs: 20, maxDelayMs: 200 };
// Each test that talks to a server fails after 60 s rather than hang.
const isPub = (c) => c.op === 'PUB' || c.op === 'HPUB';

test('ServerList: reconnects try the next server, wrapping, the backoff pass growing per full pass', () => {
  const l = new ServerList(['a:1', 'b:2', 'c:3', 'a:1'].map(parseServer), true);
  assert.deepEqual(l.all.map((a) => a.url), ['a:1', 'b:2', 'c:3'], 'repeats dropped');
  l.use(l.all[1]);
  const got = [0, 1, 2, 3, 4, 5, 6].map((n) => {
    const { addr, pass } = l.attempt(n);
    return `${addr.url}/${pass}`;
  });
  assert.deepEqual(got, ['c:3/0', 'a:1/0', 'b:2/0', 'c:3/1', 'a:1/1', 'b:2/1', 'c:3/2']);
});

test('ServerList: connect_urls are learnt once each, up to 64, with the scheme and credentials of the server that sent them', () => {
  const via = parseServer('tls://u:p@seed:4222');
  const l = new ServerList([via], true);
  const added = l.learn(['seed:4222', 'n2:4223', 'n2:4223', '[::1]:4224', 'nats://x:1', 'x', 'u@y:1', 'z:0', 'w:1/a', 7, 'N3:4225'], via);
  assert.equal(added, 3);
  assert.deepEqual(
    l.all.map((a) => [a.url, a.host, a.port, a.tls, a.user, a.pass]),
    [
      ['tls://u:p@seed:4222', 'seed', 4222, true, 'u', 'p'],
      ['tls://n2:4223', 'n2', 4223, true, 'u', 'p'],
      ['tls://[::1]:4224', '::1', 4224, true, 'u', 'p'],
      ['tls://N3:4225', 'N3', 4225, true, 'u', 'p'],
    ],
  );
  assert.equal(l.learn('n9:1', via), 0, 'not an array: ignored');
  const many = Array.from({ length: 100 }, (_, i) => `h${i}:1`);
  l.learn(many, via);
  assert.equal(l.all.length, MAX_SERVERS);
  assert.equal(l.learn(['late:1'], via), 0);
  const token = new ServerList([parseServer('nats://tok@s:1')], true);
  token.learn(['t:2'], token.all[0]);
  assert.deepEqual([token.all[1].tls, token.all[1].token, token.all[1].user], [false, 'tok', undefined]);
  const off = new ServerList([via], false);
  assert.equal(off.learn(['n2:4223'], via), 0);
  assert.equal(off.all.length, 1);
});

test('connect names every address it tried when none answers', { timeout: 60000 }, async () => {
  const a = await deadAddr();
  const b = await deadAddr();
  await assert.rejects(connect({ servers: [a, `nats://${b}`], reconnect: false }), (e) => {
    assert.equal(e.code, 'no_servers');
    assert.ok(e.message.includes(a) && e.message.includes(b), e.message);
    assert.ok(e.message.indexOf(a) < e.message.indexOf(b), 'in the order tried');
    assert.equal(e.message.split('ECONNREFUSED').length, 3, `each with why: ${e.message}`);
    return true;
  });
});

test('connect skips a dead first address and uses the second', { timeout: 60000 }, async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const dead = await deadAddr();
  const nc = await connect({ servers: [dead, srv.url] });
  t.after(() => nc.close());
  assert.equal(nc.info.server_id, srv.ready.server_id);
  assert.deepEqual(nc.servers, [dead, srv.url]);
  assert.equal(await nc.publish('_INBOX.a', 'x'), null);
});

test('after a crash the client moves to the next server and every confirmed publish is stored on one of the two', { timeout: 60000 }, async (t) => {
  let a = await startServer(t);
  if (!a) return;
  const b = await startServer(t);
  for (const s of [a, b]) {
    const admin = await connect({ servers: s.url, reconnect: false });
    try {
      await admin.topics.create('fo', { durability: 'sync' });
    } catch (e) {
      await admin.close();
      if (e.code === 'internal') return t.skip(`durable engine unavailable in this server build: ${e.message}`);
      throw e;
    }
    await admin.close();
  }
  const nc = await connect({ servers: [a.url, b.url], discover: false, reconnect: quick });
  t.after(() => nc.close());
  const confirmed = new Set();
  const failed = [];
  let killed;
  const track = (id, p) =>
    p.then(
      (pos) => {
        assert.ok(pos !== null);
        confirmed.add(id);
        if (confirmed.size === 50 && !killed) killed = a.kill();
      },
      (e) => failed.push([id, e]),
    );
  const first = [];
  for (let i = 0; i < 400; i++) first.push(track(i, nc.publish('fo', `m-${i}`)));
  await waitFor(() => killed, { what: 'the kill' });
  await killed;
  await Promise.all(first);
  const later = [];
  for (let i = 400; i < 500; i++) later.push(track(i, nc.publish('fo', `m-${i}`)));
  await Promise.all(later);
  assert.deepEqual(failed, [], 'no publish failed');
  assert.equal(confirmed.size, 500);
  assert.ok(nc.reconnects >= 1);
  assert.equal(nc.info.server_id, b.ready.server_id, 'moved to the second server');

  a = await startServer(t, { port: a.port, dataDir: a.dataDir });
  const stored = new Map();
  for (const s of [a, b]) {
    const c = await connect({ servers: s.url, reconnect: false });
    for (;;) {
      const batch = await c.fetch('fo', 'check', { max: 200, waitMs: 200 });
      if (batch.length === 0) break;
      for (const m of batch) stored.set(Number(m.string().slice(2)), s.url);
      await c.ackAll(batch);
    }
    await c.close();
  }
  for (const id of confirmed) assert.ok(stored.has(id), `confirmed publish ${id} is on neither server`);
  assert.ok([...stored.values()].includes(a.url) && [...stored.values()].includes(b.url), 'both servers took some');
});

test('discovery: a client given one node reaches the node its INFO lists; with discover false it does not', { timeout: 60000 }, async (t) => {
  const b = await startServer(t);
  if (!b) return;
  const a = await startServer(t, { args: ['-client-advertise', b.addr] });
  const nc = await connect({ servers: a.url, reconnect: quick });
  t.after(() => nc.close());
  assert.deepEqual(nc.servers, [a.url, `nats://${b.addr}`]);
  await a.kill();
  await waitFor(() => nc.reconnects >= 1 && nc.isConnected, { what: 'the reconnect to the discovered node' });
  assert.equal(nc.info.server_id, b.ready.server_id);
  assert.equal(await nc.publish('_INBOX.d', 'x'), null);

  const a2 = await startServer(t, { args: ['-client-advertise', b.addr] });
  const off = await connect({ servers: a2.url, discover: false, reconnect: { ...quick, maxAttempts: 3 } });
  assert.deepEqual(off.servers, [a2.url]);
  await a2.kill();
  const err = await off.closed();
  assert.equal(err.code, 'no_servers');
  assert.ok(err.message.includes(a2.addr) && !err.message.includes(b.addr), err.message);
});

test('after a lost link the unconfirmed publishes go first, in order, then the subscriptions, then what came meanwhile', { timeout: 60000 }, async (t) => {
  // The first peer never confirms a publish; it stays up, so a client that
  // went back to the first server of the list would be seen there.
  const p1 = await fakePeer(t, { answer: (c) => (isPub(c) ? null : '+OK') });
  let n = 0;
  const p2 = await fakePeer(t, { answer: (c) => (isPub(c) ? `+OK 0:${++n}` : '+OK') });
  const nc = await connect({ servers: [p1.url, p2.url], crc: true, reconnect: { initialDelayMs: 50, maxDelayMs: 50 } });
  t.after(() => nc.close());
  const sub = nc.subscribe('live');
  await sub.ready;
  const pubs = ['p1', 'p2', 'p3'].map((s) => nc.publish('t', s, { key: s === 'p2' ? 'k' : undefined }));
  await waitFor(() => p1.pubs(0).length === 3, { what: 'three publishes at the first peer' });
  p1.cut();
  await waitFor(() => !nc.isConnected, { what: 'the lost link' });
  pubs.push(nc.publish('t', 'p4'));
  const positions = await Promise.all(pubs);
  assert.equal(p1.conns.length, 1, 'the reconnect went to the next server, not back to the first');
  const order = p2.conns[0].cmds.filter((c) => c.op !== 'CONNECT' && c.op !== 'PING').map((c) => c.payload ?? `${c.op} ${c.args[0]}`);
  assert.deepEqual(order, ['p1', 'p2', 'p3', 'SUB live', 'p4']);
  assert.deepEqual(positions.map((p) => p.seq), [1n, 2n, 3n, 4n]);
});

test('a publish answered not_leader is resent on the same link until confirmed', { timeout: 60000 }, async (t) => {
  let refusals = 3;
  const peer = await fakePeer(t, { answer: (c) => (!isPub(c) ? '+OK' : refusals-- > 0 ? NOT_LEADER : '+OK 0:7') });
  const nc = await connect({ servers: peer.url });
  t.after(() => nc.close());
  const pos = await nc.publish('t', 'x');
  assert.deepEqual(pos, { partition: 0, seq: 7n, duplicate: false });
  assert.deepEqual(peer.pubs(0), ['x', 'x', 'x', 'x']);
  assert.equal(peer.conns.length, 1);
  assert.equal(nc.reconnects, 0);
  assert.equal(nc.unconfirmed, 0);
});

test('a publish answered not_leader until its timeout rejects with NotLeaderError, retriable; other commands reject at once', { timeout: 60000 }, async (t) => {
  const peer = await fakePeer(t, { answer: (c) => (c.op === 'SUB' ? '+OK' : NOT_LEADER) });
  const nc = await connect({ servers: peer.url, timeoutMs: 400 });
  t.after(() => nc.close());
  await assert.rejects(nc.publish('t', 'x'), (e) => e instanceof NotLeaderError && e.code === 'not_leader' && e.retriable === true);
  assert.ok(peer.pubs(0).length >= 2, `resent: ${peer.pubs(0).length} sends`);
  assert.equal(nc.unconfirmed, 0, 'the window slot is given back');
  await assert.rejects(nc.topics.info('t'), (e) => e instanceof NotLeaderError);
  assert.equal(peer.conns[0].cmds.filter((c) => c.op === 'TOPIC').length, 1, 'a TOPIC command is not resent');
});

test('publishes parked on not_leader keep their place in the publish window', { timeout: 60000 }, async (t) => {
  let leader = false;
  let n = 0;
  const peer = await fakePeer(t, {
    info: { max_unconfirmed: 2 },
    answer: (c) => (!isPub(c) ? '+OK' : leader ? `+OK 0:${++n}` : NOT_LEADER),
  });
  const nc = await connect({ servers: peer.url, timeoutMs: 60000 });
  t.after(() => nc.close());
  const pubs = ['a', 'b', 'c'].map((s) => nc.publish('t', s));
  await waitFor(() => peer.pubs(0).length >= 6, { what: 'a and b resent twice' });
  assert.ok(!peer.pubs(0).includes('c'), `c went out past a full window: ${peer.pubs(0)}`);
  assert.equal(nc.unconfirmed, 2);
  leader = true;
  const got = await Promise.all(pubs);
  assert.equal(got.length, 3);
  assert.ok(peer.pubs(0).includes('c'));
});

test('a publish parked on not_leader when the link drops is resent on the next link', { timeout: 60000 }, async (t) => {
  const p1 = await fakePeer(t, { answer: (c) => (isPub(c) ? NOT_LEADER : '+OK') });
  const p2 = await fakePeer(t, { answer: (c) => (isPub(c) ? '+OK 3:9' : '+OK') });
  const nc = await connect({ servers: [p1.url, p2.url], timeoutMs: 60000, reconnect: quick });
  t.after(() => nc.close());
  const p = nc.publish('t', 'x');
  await waitFor(() => p1.pubs(0).length >= 2, { what: 'a resend on the first peer' });
  p1.cut();
  assert.deepEqual(await p, { partition: 3, seq: 9n, duplicate: false });
  assert.deepEqual(p2.pubs(0), ['x']);
});

test('a publish abandoned while parked on not_leader gives its window slot back and is not sent again', { timeout: 60000 }, async (t) => {
  const p1 = await fakePeer(t, { answer: (c) => (isPub(c) ? NOT_LEADER : '+OK') });
  const p2 = await fakePeer(t, { answer: (c) => (isPub(c) ? '+OK 0:1' : '+OK') });
  const nc = await connect({ servers: [p1.url, p2.url], timeoutMs: 60000, reconnect: quick });
  t.after(() => nc.close());
  const stop = new AbortController();
  const p = nc.publish('t', 'x', { signal: stop.signal });
  await waitFor(() => p1.pubs(0).length >= 2, { what: 'a resend on the first peer' });
  stop.abort(new Error('caller gave up'));
  await assert.rejects(p, /caller gave up/);
  await waitFor(() => nc.unconfirmed === 0, { what: 'the window slot back' });
  const sent = p1.pubs(0).length;
  p1.cut();
  assert.equal((await nc.publish('t', 'y')).seq, 1n);
  assert.deepEqual(p2.pubs(0), ['y']);
  assert.equal(p1.pubs(0).length, sent, 'not sent again after it was abandoned');
});

test('a discovered server is reached with the credentials of the server that listed it, and INFO updates add to the list', { timeout: 60000 }, async (t) => {
  const p2 = await fakePeer(t);
  const p3 = await fakePeer(t);
  const p1 = await fakePeer(t, { info: { connect_urls: [p2.addr] } });
  const nc = await connect({ servers: `nats://s3cret@${p1.addr}`, reconnect: quick });
  t.after(() => nc.close());
  assert.deepEqual(nc.servers, [`nats://s3cret@${p1.addr}`, p2.url]);
  p1.conns[0].sock.write(`INFO ${JSON.stringify({ server_id: 'peer', fibril: 1, connect_urls: [p2.addr, p3.addr] })}\r\n`);
  await waitFor(() => nc.servers.length === 3, { what: 'the INFO update learnt' });
  assert.deepEqual(nc.servers, [`nats://s3cret@${p1.addr}`, p2.url, p3.url]);
  p1.cut();
  await waitFor(() => nc.reconnects >= 1 && nc.isConnected, { what: 'the reconnect' });
  const hello = p2.conns[0].cmds.find((c) => c.op === 'CONNECT');
  assert.equal(JSON.parse(hello.line.slice(8)).auth_token, 's3cret');
});
