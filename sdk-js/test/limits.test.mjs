// max_control_line from INFO limits what the client sends, never what it
// accepts: a line the server relays (MSG carries the publisher's subject and
// reply plus a sid, and in Fibril mode a CRC token) may be longer than the
// longest line the server accepts from clients. Go and Python accept such
// lines too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { connect } from '../dist/index.js';
import { startServer, waitFor } from './helpers/server.mjs';

test('a relayed MSG line longer than INFO max_control_line is accepted', { timeout: 20000 }, async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  // no reconnect: a dropped link must show as closed(), not as a silent retry
  const nc = await connect({ servers: srv.url, reconnect: false });
  t.after(() => nc.close());
  const limit = nc.info.max_control_line ?? 4096;
  const subject = 'long.' + 's'.repeat(limit / 2 - 10);
  // PUB <subject> <reply> 2: exactly the limit, so the server takes it.
  const head = `PUB ${subject} `;
  const reply = '_INBOX.' + 'r'.repeat(limit - head.length - ' 2'.length - '_INBOX.'.length);
  const pub = `${head}${reply} 2`;
  assert.equal(pub.length, limit);
  const sub = nc.subscribe(subject);
  await nc.flush();

  const raw = net.connect(srv.port, '127.0.0.1');
  t.after(() => raw.destroy());
  let got = '';
  raw.setEncoding('latin1');
  raw.on('data', (d) => (got += d));
  raw.write('CONNECT {"verbose":false,"pedantic":false}\r\n' + pub + '\r\nhi\r\nPING\r\n');
  await waitFor(() => got.includes('PONG'), { what: 'PONG after the PUB' });
  assert.ok(!got.includes('-ERR'), `server refused the PUB: ${got}`);

  const it = sub[Symbol.asyncIterator]();
  const r = await Promise.race([it.next(), nc.closed().then((e) => ({ closedWith: e }))]);
  assert.ok(!('closedWith' in r), `client closed: ${r.closedWith?.message}`);
  assert.equal(Buffer.from(r.value.data).toString(), 'hi');
  assert.equal(r.value.reply, reply);
  await nc.flush(); // the connection is still up
});
