// TLS: the server's TLS listener sends INFO in clear, then the client
// upgrades (as NATS does). Uses a throwaway self-signed certificate made
// with openssl; skipped when openssl is missing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '../dist/index.js';
import { startServer } from './helpers/server.mjs';

function makeCert(t) {
  const dir = mkdtempSync(join(tmpdir(), 'fibril-sdkjs-tls-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
      '-subj', '/CN=fibril-test', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ], { stdio: 'ignore' });
  } catch {
    return undefined;
  }
  return { dir, cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem') };
}

test('TLS: publish and subscribe over the TLS listener; an untrusted certificate is refused', async (t) => {
  const c = makeCert(t);
  if (!c) return t.skip('openssl not available');
  const srv = await startServer(t, { args: ['-tls-listen', '127.0.0.1:0', '-tls-cert', c.cert, '-tls-key', c.key] });
  if (!srv) return;
  const tlsAddr = srv.ready?.tls_addr;
  assert.ok(tlsAddr, 'ready line names the TLS listener');
  const ca = readFileSync(c.cert);
  const nc = await connect({ servers: `tls://${tlsAddr}`, tls: { ca } });
  t.after(() => nc.close());
  assert.equal(nc.info.tls_required, true);
  const sub = nc.subscribe('_INBOX.tls');
  await sub.ready;
  assert.equal(await nc.publish('_INBOX.tls', 'secret'), null);
  for await (const m of sub) {
    assert.equal(m.string(), 'secret');
    break;
  }
  await assert.rejects(connect({ servers: `tls://${tlsAddr}`, reconnect: false, timeoutMs: 3000 }), (e) => e.code === 'no_servers' && /CERT/.test(String(e.cause?.code)));
});
