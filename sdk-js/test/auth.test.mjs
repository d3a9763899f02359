// User/password auth against a real `fibril serve --config <file>` whose
// users carry bcrypt hashes (cmd/fibril/README.md, "Security"): the right
// password connects and publishes; a wrong one is refused with the typed
// AuthViolationError, once, without a reconnect loop; and a login refused
// while reconnecting ends the connection instead of retrying forever.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, AuthViolationError } from '../dist/index.js';
import { startServer, waitFor } from './helpers/server.mjs';
import { corruptingProxy } from './helpers/proxy.mjs';

// bcrypt (cost 4, the minimum, to keep the tests fast) of "right-pw" and of
// "other-pw", made with golang.org/x/crypto/bcrypt.
const RIGHT = '$2a$04$OBEprpv7bW9jM5txNDGR/ut93/1wRwe9KY/8QT/uc0S7Kq2CIenvq';
const OTHER = '$2a$04$N.NP2osD48ZlAC7VWSZFKOrr52LJ6awQma0NJSuwCxWNdorFspp9i';

/** userConfig writes a config file with one user "app" and returns its path. */
function userConfig(t, hash) {
  const dir = mkdtempSync(join(tmpdir(), 'fibril-sdkjs-auth-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'fibril.json');
  writeFileSync(file, JSON.stringify({ users: [{ name: 'app', password_bcrypt: hash }] }));
  return file;
}

/** isAuth reports whether e, or an error in its cause chain, is the auth_violation error. */
function isAuth(e) {
  for (let x = e; x; x = x.cause) if (x instanceof AuthViolationError && x.code === 'auth_violation') return true;
  return false;
}

// A proxy that forwards bytes unchanged (its marker never occurs) and counts
// the connections made through it.
const counting = (t, srv) => corruptingProxy(t, srv, 'never-on-the-wire-1', 'never-on-the-wire-2');

test('user/password: the right password connects and publishes', async (t) => {
  const srv = await startServer(t, { args: ['--config', userConfig(t, RIGHT)] });
  if (!srv) return;
  const nc = await connect({ servers: srv.url, user: 'app', pass: 'right-pw' });
  t.after(() => nc.close());
  assert.equal(nc.info.auth_required, true);
  await nc.topics.create('orders');
  const p1 = await nc.publish('orders', 'one');
  const p2 = await nc.publish('orders', 'two');
  assert.ok(p1 && p2, 'durable publishes are confirmed with a position');
  // a poll may answer fewer than asked (SPEC.md): poll until both arrived
  const msgs = [];
  await waitFor(async () => {
    msgs.push(...(await nc.fetch('orders', 'billing', { max: 2 - msgs.length, waitMs: 200 })));
    return msgs.length >= 2;
  }, { what: 'both messages' });
  assert.deepEqual(msgs.map((m) => Buffer.from(m.data).toString()), ['one', 'two']);
  await nc.ackAll(msgs);
  // user and password may ride in the URL too
  const u = await connect({ servers: `nats://app:right-pw@${srv.addr}` });
  await u.flush();
  await u.close();
  // and the options win over the URL
  await assert.rejects(connect({ servers: `nats://app:right-pw@${srv.addr}`, user: 'app', pass: 'wrong' }), AuthViolationError);
});

test('user/password: a wrong password is a typed error and is not retried', async (t) => {
  const srv = await startServer(t, { args: ['--config', userConfig(t, RIGHT)] });
  if (!srv) return;
  const proxy = await counting(t, srv);
  for (const creds of [{ user: 'app', pass: 'wrong' }, { user: 'nobody', pass: 'right-pw' }, {}]) {
    const before = proxy.state.connections;
    const err = await connect({ servers: proxy.url, ...creds, reconnect: { initialDelayMs: 10, maxDelayMs: 20, maxAttempts: -1 } }).then(
      () => assert.fail(`connect with ${JSON.stringify(creds)} succeeded`),
      (e) => e,
    );
    // Every refusal is auth_violation, an unknown user's too (its bcrypt
    // run no longer races the auth timer into auth_timeout).
    assert.ok(err instanceof AuthViolationError, `${JSON.stringify(creds)}: got ${err?.name}: ${err?.message}`);
    assert.equal(err.code, 'auth_violation');
    assert.equal(err.retriable, false);
    // One dial, and none after it: a refused login is final. The quiet
    // period is the check (nothing may happen in it), not a wait for a
    // condition; with 10 ms backoff a loop would dial many times in it.
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(proxy.state.connections - before, 1, 'connection attempts for one refused connect');
  }
});

test('user/password: reconnect gives up on a refused login', async (t) => {
  const first = await startServer(t, { args: ['--config', userConfig(t, RIGHT)] });
  if (!first) return;
  const proxy = await counting(t, first);
  const nc = await connect({ servers: proxy.url, user: 'app', pass: 'right-pw', reconnect: { initialDelayMs: 10, maxDelayMs: 20, maxAttempts: -1 } });
  t.after(() => nc.close());
  await nc.flush();
  const closed = nc.closed();
  // The server comes back on the same port with the password changed.
  await first.kill();
  await startServer(t, { port: first.port, args: ['--config', userConfig(t, OTHER)] });
  // reconnect attempts made while the port was down are refused by the proxy's
  // dial, not by a login; the first one that reaches the new server must end it.
  const err = await waitFor(() => Promise.race([closed, new Promise((r) => setTimeout(() => r(undefined), 50))]), {
    timeout: 10000,
    what: 'the connection to close after a refused login',
  });
  assert.ok(isAuth(err), `closed() resolved with ${err?.name}: ${err?.message} (cause ${err?.cause?.name})`);
  await assert.rejects(nc.publish('orders', 'x'), (e) => e.code !== undefined);
  const dials = proxy.state.connections;
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(proxy.state.connections, dials, 'no dial after giving up');
});
