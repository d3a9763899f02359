// Parser tests: every verb in both directions, any split of the input,
// limits, fatal and non-fatal errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Parser, Direction, FibrilError, encodePub, encodeMsg, encodeCommand, crc32, CrcMismatchError } from '../dist/index.js';

const b = (s) => Buffer.from(s);
const C2S = Direction.ClientToServer;
const S2C = Direction.ServerToClient;

/** plain turns byte fields into strings so commands compare with deepEqual. */
function plain(c) {
  const o = { ...c };
  if (o.payload !== undefined) o.payload = Buffer.from(o.payload).toString();
  if (o.header !== undefined) o.header = Buffer.from(o.header).toString();
  return o;
}

/** run feeds input in pieces of step bytes; returns commands and non-fatal error codes in order. */
function run(dir, input, { crc = false, limits = {}, step = input.length } = {}) {
  const p = new Parser(dir, limits);
  p.setCRC(crc);
  const out = [];
  const h = { command: (c) => out.push(plain(c)), error: (e) => out.push({ error: e.code }) };
  let fatal;
  try {
    for (let i = 0; i < input.length; i += step) p.feed(input.subarray(i, Math.min(input.length, i + step)), h);
  } catch (e) {
    fatal = e;
  }
  return { out, fatal, buffered: p.buffered };
}

const h1 = { topicId: 1n, groupId: 2n, partition: 0, seq: 5n, attempt: 1 };
const cases = [
  [S2C, 'PING', 'PING\r\n', {}, [{ op: 'PING' }]],
  [S2C, 'pong lower case, bare LF', 'pong\n', {}, [{ op: 'PONG' }]],
  [S2C, '+OK bare', '+OK\r\n', {}, [{ op: '+OK', text: '' }]],
  [S2C, '+OK position', '+OK 0:17\r\n', {}, [{ op: '+OK', text: '0:17' }]],
  [S2C, '-ERR', "-ERR 'crc_mismatch payload checksum does not match'\r\n", {}, [{ op: '-ERR', text: 'crc_mismatch payload checksum does not match' }]],
  [S2C, 'INFO', 'INFO {"fibril":1}\r\n', {}, [{ op: 'INFO', json: '{"fibril":1}' }]],
  [S2C, 'MSG', 'MSG foo.bar 9 5\r\nhello\r\n', {}, [{ op: 'MSG', subject: 'foo.bar', sid: '9', payload: 'hello' }]],
  [S2C, 'MSG tabs', 'MSG\tfoo  9 \t 5\r\nhello\r\n', {}, [{ op: 'MSG', subject: 'foo', sid: '9', payload: 'hello' }]],
  [S2C, 'MSG handle', 'MSG foo 9 $F.1.2.0.5.1 0\r\n\r\n', {}, [{ op: 'MSG', subject: 'foo', sid: '9', reply: '$F.1.2.0.5.1', payload: '' }]],
  [S2C, 'HMSG', 'HMSG foo 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n', {}, [{ op: 'HMSG', subject: 'foo', sid: '1', header: 'NATS/1.0\r\n\r\n', payload: 'hi' }]],
  [S2C, 'MSG crc', 'MSG foo 1 2 d8932aac\r\nhi\r\n', { crc: true }, [{ op: 'MSG', subject: 'foo', sid: '1', payload: 'hi', crc: 0xd8932aac, hasCRC: true }]],
  [S2C, 'MSG crc mismatch is skipped', 'MSG foo 1 2 00000000\r\nhi\r\nPING\r\n', { crc: true }, [{ error: 'crc_mismatch' }, { op: 'PING' }]],
  [S2C, 'MSG crc dash refused from server', 'MSG foo 1 2 -\r\nhi\r\n', { crc: true }, [{ error: 'invalid_crc_token' }]],
  [S2C, 'client verb from server', 'PUB a 1\r\nx\r\n', {}, [{ error: 'unknown_op' }, { error: 'unknown_op' }]],
  [C2S, 'PUB', 'PUB a.b 3\r\nabc\r\n', {}, [{ op: 'PUB', subject: 'a.b', payload: 'abc' }]],
  [C2S, 'PUB reply crc dash', 'PUB a r 3 -\r\nabc\r\n', { crc: true }, [{ op: 'PUB', subject: 'a', reply: 'r', payload: 'abc', crc: crc32(b('abc')), hasCRC: false }]],
  [C2S, 'PUB hello crc', 'PUB orders 5 3610a686\r\nhello\r\n', { crc: true }, [{ op: 'PUB', subject: 'orders', payload: 'hello', crc: 0x3610a686, hasCRC: true }]],
  [C2S, 'HPUB', 'HPUB a 12 12\r\nNATS/1.0\r\n\r\n\r\n', {}, [{ op: 'HPUB', subject: 'a', header: 'NATS/1.0\r\n\r\n', payload: '' }]],
  [C2S, 'HPUB bad header', 'HPUB a 12 12\r\nNATS/2.0\r\n\r\n\r\n', {}, [{ error: 'invalid_header' }]],
  [C2S, 'PUB wildcard', 'PUB a.* 1\r\nx\r\n', {}, [{ error: 'wildcard_not_allowed' }]],
  [C2S, 'PUB bad subject', 'PUB a..b 1\r\nx\r\n', {}, [{ error: 'invalid_subject' }]],
  [C2S, 'SUB plain', 'SUB a.* 1\r\n', {}, [{ op: 'SUB', subject: 'a.*', sid: '1' }]],
  [C2S, 'SUB group max', 'SUB orders billing 7 16\r\n', {}, [{ op: 'SUB', subject: 'orders', group: 'billing', sid: '7', max: 16 }]],
  [C2S, 'SUB sid 0', 'SUB a 0\r\n', {}, [{ error: 'invalid_args' }]],
  [C2S, 'UNSUB', 'UNSUB 7 3\r\n', {}, [{ op: 'UNSUB', sid: '7', max: 3 }]],
  [C2S, 'ACK many', 'ACK $F.1.2.0.5.1 $F.1.2.0.6.1\r\n', {}, [{ op: 'ACK', handles: [h1, { ...h1, seq: 6n }] }]],
  [C2S, 'ACK bad handle', 'ACK $F.1.2.0.05.1\r\n', {}, [{ error: 'invalid_handle' }]],
  [C2S, 'NACK delay', 'NACK $F.1.2.0.5.1 250\r\n', {}, [{ op: 'NACK', handles: [h1], millis: 250 }]],
  [C2S, 'REJECT', 'reject $F.1.2.0.5.1\r\n', {}, [{ op: 'REJECT', handles: [h1] }]],
  [C2S, 'EXTEND', 'EXTEND $F.1.2.0.5.1\r\n', {}, [{ op: 'EXTEND', handles: [h1] }]],
  [C2S, 'POLL', 'POLL orders g 10 500\r\n', {}, [{ op: 'POLL', subject: 'orders', group: 'g', max: 10, millis: 500 }]],
  [C2S, 'POLL max 0', 'POLL orders g 0\r\n', {}, [{ error: 'invalid_args' }]],
  [C2S, 'POLL bad group', 'POLL orders g.x 1\r\n', {}, [{ error: 'invalid_name' }]],
  [C2S, 'POLL overflow', 'POLL orders g 1 4294967296\r\n', {}, [{ error: 'number_overflow' }]],
  [C2S, 'POLL not a number', 'POLL orders g x\r\n', {}, [{ error: 'invalid_number' }]],
  [C2S, 'TOPIC CREATE json', 'TOPIC CREATE orders {"partitions": 2}\r\n', {}, [{ op: 'TOPIC CREATE', subject: 'orders', json: '{"partitions": 2}' }]],
  [C2S, 'TOPIC LIST', 'topic list\r\n', {}, [{ op: 'TOPIC LIST' }]],
  [C2S, 'GROUP LIST', 'GROUP list orders\r\n', {}, [{ op: 'GROUP LIST', subject: 'orders' }]],
  [C2S, 'GROUP CREATE', 'GROUP CREATE orders billing {"lease_ms":1}\r\n', {}, [{ op: 'GROUP CREATE', subject: 'orders', group: 'billing', json: '{"lease_ms":1}' }]],
  [C2S, 'unknown op is skipped', 'FOO\r\nPING\r\n', {}, [{ error: 'unknown_op' }, { op: 'PING' }]],
  [C2S, 'empty lines ignored', '\r\n  \r\nPING\r\n', {}, [{ op: 'PING' }]],
  [C2S, 'CONNECT', 'CONNECT {"fibril":1}\r\n', {}, [{ op: 'CONNECT', json: '{"fibril":1}' }]],
];

test('parser: every verb, whole and byte at a time', () => {
  for (const [dir, name, input, opts, want] of cases) {
    for (const step of [input.length, 1, 2, 3, 7]) {
      const r = run(dir, b(input), { ...opts, step });
      assert.equal(r.fatal, undefined, `${name}: unexpected fatal ${r.fatal}`);
      assert.deepEqual(r.out, want, `${name} (step ${step})`);
      assert.equal(r.buffered, 0, name);
    }
  }
});

const fatals = [
  [S2C, 'bad size', 'MSG a 1 x\r\n', {}, 'bad_frame'],
  [S2C, 'too many args', 'MSG a 1 r 2 3\r\n', {}, 'bad_frame'],
  [S2C, 'missing crc token', 'MSG a 1 2\r\nhi\r\n', { crc: true }, 'bad_frame'],
  [S2C, 'payload too big, announced', 'MSG a 1 11\r\n', { limits: { maxPayload: 10 } }, 'max_payload'],
  [C2S, 'control line too long', 'PUB ' + 'a'.repeat(100) + ' 1\r\n', { limits: { maxControlLine: 64 } }, 'max_control_line'],
  [C2S, 'control line too long, no LF yet', 'PUB ' + 'a'.repeat(100), { limits: { maxControlLine: 64 } }, 'max_control_line'],
  [S2C, 'no CRLF after payload', 'MSG a 1 2\r\nhiXX', {}, 'bad_frame'],
  [S2C, 'header bigger than total', 'HMSG a 1 20 10\r\n', {}, 'bad_frame'],
  [C2S, 'CONNECT without json', 'CONNECT\r\n', {}, 'invalid_connect'],
];

test('parser: fatal errors are typed and stop the parser', () => {
  for (const [dir, name, input, opts, code] of fatals) {
    for (const step of [input.length, 1]) {
      const r = run(dir, b(input), { ...opts, step });
      assert.ok(r.fatal instanceof FibrilError, `${name} (step ${step}): got ${r.fatal}`);
      assert.equal(r.fatal.code, code, name);
      assert.equal(r.fatal.fatal, true, name);
    }
  }
  const p = new Parser(S2C, { maxPayload: 1 });
  assert.throws(() => p.feed(b('MSG a 1 2\r\n'), { command() {} }), FibrilError);
  assert.throws(() => p.feed(b('PING\r\n'), { command() {} }), FibrilError, 'a failed parser refuses more input');
});

test('parser: a crc_mismatch error carries the delivery so an SDK can nack it', () => {
  const p = new Parser(S2C);
  p.setCRC(true);
  let err;
  p.feed(b('MSG t 4 $F.1.1.0.9.2 2 00000000\r\nhi\r\n'), { command() { assert.fail('no command expected'); }, error(e) { err = e; } });
  assert.ok(err instanceof CrcMismatchError);
  assert.equal(err.retriable, true);
  assert.equal(err.command.reply, '$F.1.1.0.9.2');
  assert.equal(err.command.sid, '4');
});

test('parser: waits for the whole body, then its CRLF', () => {
  const p = new Parser(S2C);
  const got = [];
  const h = { command: (c) => got.push(c) };
  p.feed(b('MSG a 1 5\r\nhel'), h);
  assert.equal(got.length, 0);
  assert.equal(p.pending, 'MSG a 1 5\r\n'.length + 6);
  p.feed(b('lo\r'), h);
  assert.equal(got.length, 0, 'CR alone is not the end');
  p.feed(b('\n'), h);
  assert.equal(got.length, 1);
  assert.equal(Buffer.from(got[0].payload).toString(), 'hello');
  assert.equal(p.buffered, 0);
});

test('parser: the handler can switch CRC mode for the next frame in the same chunk', () => {
  const p = new Parser(S2C);
  const got = [];
  p.feed(b('+OK\r\nMSG a 1 2 d8932aac\r\nhi\r\n'), {
    command(c) {
      got.push(c);
      if (c.op === '+OK') p.setCRC(true);
    },
  });
  assert.equal(got.length, 2);
  assert.equal(got[1].crc, 0xd8932aac);
});

test('parser: round-trips encoded frames with any split point', () => {
  const hdr = b('NATS/1.0\r\nFibril-Key: k\r\n\r\n');
  const frames = [
    encodeMsg({ subject: 'x.y', sid: '1', payload: b('payload\r\nwith CRLF'), crc: true }),
    encodeMsg({ subject: 'x', sid: '3', reply: '$F.1.2.3.4.5', header: hdr, payload: b(''), crc: true }),
    encodeCommand({ op: '+OK', text: '0:1' }, true),
  ];
  const all = Buffer.concat(frames);
  for (let cut = 0; cut <= all.length; cut++) {
    const p = new Parser(S2C);
    p.setCRC(true);
    const got = [];
    const h = { command: (c) => got.push(c), error: (e) => assert.fail(e.message) };
    p.feed(all.subarray(0, cut), h);
    p.feed(all.subarray(cut), h);
    assert.equal(got.length, 3, `cut ${cut}`);
    assert.equal(Buffer.from(got[0].payload).toString(), 'payload\r\nwith CRLF');
    assert.equal(got[0].crc, crc32(b('payload\r\nwith CRLF')));
    assert.equal(got[1].reply, '$F.1.2.3.4.5');
    assert.equal(Buffer.from(got[1].header).toString(), hdr.toString());
    assert.equal(got[2].text, '0:1');
  }
  const pub = encodePub({ subject: 'a', header: hdr, payload: b('p'), crc: true });
  const r = run(C2S, pub, { crc: true, step: 1 });
  assert.equal(r.out[0].hasCRC, true);
  assert.equal(r.out[0].crc, crc32(hdr, b('p')));
});
