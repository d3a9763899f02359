// Parser tests: every verb, any split of the input, limits and errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Parser, ParserState, ParseError, ParseErrorCodes, encodePub, encodeMsg, crc32 } from '../dist/index.js';

const b = (s) => Buffer.from(s);

/** frames parses input fed in pieces of the given size and returns plain frames. */
function parseAll(input, opts = {}, step = input.length) {
  const p = new Parser(opts);
  const out = [];
  for (let i = 0; i < input.length; i += step) {
    p.feed(input.subarray(i, Math.min(input.length, i + step)), (f) => out.push(plain(f)));
  }
  assert.equal(p.buffered, 0, 'no bytes left over');
  assert.equal(p.state, ParserState.OpStart);
  return out;
}

/** plain turns byte fields into strings so frames compare with deepEqual. */
function plain(f) {
  const o = { ...f };
  if (o.payload !== undefined) o.payload = Buffer.from(o.payload).toString();
  if (o.header !== undefined) o.header = Buffer.from(o.header).toString();
  return o;
}

const cases = [
  ['PING', 'PING\r\n', {}, [{ op: 'PING' }]],
  ['pong lower case, bare LF', 'pong\n', {}, [{ op: 'PONG' }]],
  ['+OK bare', '+OK\r\n', {}, [{ op: 'OK', arg: '' }]],
  ['+OK position', '+OK 0:17\r\n', {}, [{ op: 'OK', arg: '0:17' }]],
  ['+OK json', '+OK {"a":1}\r\n', {}, [{ op: 'OK', arg: '{"a":1}' }]],
  ['-ERR', "-ERR 'crc_mismatch payload checksum does not match'\r\n", {}, [{ op: 'ERR', text: 'crc_mismatch payload checksum does not match' }]],
  ['INFO', 'INFO {"fibril":1,"max_payload":10}\r\n', {}, [{ op: 'INFO', json: '{"fibril":1,"max_payload":10}', info: { fibril: 1, max_payload: 10 } }]],
  ['MSG', 'MSG foo.bar 9 5\r\nhello\r\n', {}, [{ op: 'MSG', headers: false, subject: 'foo.bar', sid: '9', payload: 'hello' }]],
  ['MSG tabs and spaces', 'MSG\tfoo  9 \t 5\r\nhello\r\n', {}, [{ op: 'MSG', headers: false, subject: 'foo', sid: '9', payload: 'hello' }]],
  ['MSG reply', 'MSG foo 9 $F.1.2.0.5.1 0\r\n\r\n', {}, [{ op: 'MSG', headers: false, subject: 'foo', sid: '9', reply: '$F.1.2.0.5.1', payload: '' }]],
  ['HMSG', 'HMSG foo 1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n', {}, [{ op: 'MSG', headers: true, subject: 'foo', sid: '1', header: 'NATS/1.0\r\n\r\n', payload: 'hi' }]],
  ['MSG crc', 'MSG foo 1 2 d2e8e5b2\r\nhi\r\n', { crc: true }, [{ op: 'MSG', headers: false, subject: 'foo', sid: '1', payload: 'hi', crc: 0xd2e8e5b2 }]],
  ['MSG crc reply', 'MSG foo 1 r.x 2 -\r\nhi\r\n', { crc: true }, [{ op: 'MSG', headers: false, subject: 'foo', sid: '1', reply: 'r.x', payload: 'hi', crc: null }]],
  ['PUB', 'PUB a.b 3\r\nabc\r\n', {}, [{ op: 'PUB', headers: false, subject: 'a.b', payload: 'abc' }]],
  ['PUB reply crc dash', 'PUB a r 3 -\r\nabc\r\n', { crc: true }, [{ op: 'PUB', headers: false, subject: 'a', reply: 'r', payload: 'abc', crc: null }]],
  ['HPUB', 'HPUB a 12 12\r\nNATS/1.0\r\n\r\n\r\n', {}, [{ op: 'PUB', headers: true, subject: 'a', header: 'NATS/1.0\r\n\r\n', payload: '' }]],
  ['SUB plain', 'SUB a.* 1\r\n', {}, [{ op: 'SUB', subject: 'a.*', sid: '1' }]],
  ['SUB group max', 'SUB orders billing 7 16\r\n', {}, [{ op: 'SUB', subject: 'orders', group: 'billing', sid: '7', maxInFlight: 16 }]],
  ['UNSUB', 'UNSUB 7 3\r\n', {}, [{ op: 'UNSUB', sid: '7', max: 3 }]],
  ['ACK many', 'ACK $F.1.1.0.1.1 $F.1.1.0.2.1\r\n', {}, [{ op: 'ACK', handles: ['$F.1.1.0.1.1', '$F.1.1.0.2.1'] }]],
  ['NACK delay', 'NACK h 250\r\n', {}, [{ op: 'NACK', handle: 'h', delayMs: 250 }]],
  ['REJECT', 'reject h\r\n', {}, [{ op: 'REJECT', handle: 'h' }]],
  ['EXTEND', 'EXTEND h\r\n', {}, [{ op: 'EXTEND', handle: 'h' }]],
  ['POLL', 'POLL orders g 10 500\r\n', {}, [{ op: 'POLL', topic: 'orders', group: 'g', max: 10, waitMs: 500 }]],
  ['TOPIC CREATE json', 'TOPIC CREATE orders {"partitions": 2}\r\n', {}, [{ op: 'TOPIC', action: 'CREATE', args: ['orders'], json: '{"partitions": 2}' }]],
  ['GROUP LIST', 'GROUP list orders\r\n', {}, [{ op: 'GROUP', action: 'LIST', args: ['orders'] }]],
  ['two frames one chunk', 'PING\r\nMSG a 1 1\r\nx\r\nPONG\r\n', {}, [{ op: 'PING' }, { op: 'MSG', headers: false, subject: 'a', sid: '1', payload: 'x' }, { op: 'PONG' }]],
];

test('parser: every verb, whole and byte at a time', () => {
  for (const [name, input, opts, want] of cases) {
    for (const step of [input.length, 1, 2, 3, 7]) {
      assert.deepEqual(parseAll(b(input), opts, step), want, `${name} (step ${step})`);
    }
  }
});

const errors = [
  ['unknown op', 'FOO bar\r\n', {}, ParseErrorCodes.UnknownOp],
  ['bad number', 'MSG a 1 x\r\n', {}, ParseErrorCodes.BadNumber],
  ['negative number', 'MSG a 1 -1\r\n', {}, ParseErrorCodes.BadNumber],
  ['too many args', 'MSG a 1 r 2 3\r\n', {}, ParseErrorCodes.BadArgs],
  ['missing crc', 'MSG a 1 2\r\nhi\r\n', { crc: true }, ParseErrorCodes.BadArgs],
  ['bad crc hex', 'MSG a 1 2 XYZ12345\r\nhi\r\n', { crc: true }, ParseErrorCodes.BadCRC],
  ['payload too big announced', 'MSG a 1 11\r\n', { maxPayload: 10 }, ParseErrorCodes.MaxPayload],
  ['control line too long', 'PUB ' + 'a'.repeat(100) + ' 1\r\n', { maxControlLine: 64 }, ParseErrorCodes.MaxControlLine],
  ['control line too long, no newline yet', 'PUB ' + 'a'.repeat(100), { maxControlLine: 64 }, ParseErrorCodes.MaxControlLine],
  ['no CRLF after payload', 'MSG a 1 2\r\nhiXX', {}, ParseErrorCodes.MissingCRLF],
  ['header bigger than total', 'HMSG a 1 20 10\r\n', {}, ParseErrorCodes.BadHeaderSize],
  ['invalid subject', 'PUB a..b 1\r\nx\r\n', {}, ParseErrorCodes.InvalidSubject],
  ['wildcard in PUB', 'PUB a.* 1\r\nx\r\n', {}, ParseErrorCodes.InvalidSubject],
  ['bad INFO json', 'INFO {nope\r\n', {}, ParseErrorCodes.BadJSON],
];

test('parser: errors are typed, fatal, and stop the parser', () => {
  for (const [name, input, opts, code] of errors) {
    for (const step of [input.length, 1]) {
      const p = new Parser(opts);
      let err;
      try {
        for (let i = 0; i < input.length; i += step) p.feed(b(input.slice(i, i + step)), () => {});
      } catch (e) {
        err = e;
      }
      assert.ok(err instanceof ParseError, `${name} (step ${step}): got ${err}`);
      assert.equal(err.code, code, name);
      assert.equal(p.state, ParserState.Failed, name);
      assert.throws(() => p.feed(b('PING\r\n'), () => {}), ParseError);
    }
  }
});

test('parser: waits for the whole payload, then its CRLF', () => {
  const p = new Parser();
  const got = [];
  p.feed(b('MSG a 1 5\r\nhel'), (f) => got.push(f));
  assert.equal(p.state, ParserState.Payload);
  assert.equal(got.length, 0);
  p.feed(b('lo\r'), (f) => got.push(f));
  assert.equal(got.length, 0, 'CR alone is not the end');
  p.feed(b('\n'), (f) => got.push(f));
  assert.equal(got.length, 1);
  assert.equal(Buffer.from(got[0].payload).toString(), 'hello');
  assert.equal(p.state, ParserState.OpStart);
});

test('parser: the handler can switch CRC mode for the next frame in the same chunk', () => {
  const p = new Parser();
  const got = [];
  const input = b('+OK\r\nMSG a 1 2 ' + crc32(b('hi')).toString(16).padStart(8, '0') + '\r\nhi\r\n');
  p.feed(input, (f) => {
    got.push(f);
    if (f.op === 'OK') p.crc = true;
  });
  assert.equal(got.length, 2);
  assert.equal(got[1].crc, crc32(b('hi')));
});

test('parser: round-trips encoded PUB and MSG with any split', () => {
  const hdr = b('NATS/1.0\r\nFibril-Key: k\r\n\r\n');
  const frames = [
    encodePub({ subject: 'x.y', payload: b('payload\r\nwith CRLF'), crc: true }),
    encodePub({ subject: 'x', reply: 'r', header: hdr, payload: b('p'), crc: true }),
    encodeMsg({ subject: 'x', sid: '3', reply: '$F.1.2.3.4.5', header: hdr, payload: b(''), crc: true }),
  ];
  const all = Buffer.concat(frames);
  for (let cut = 0; cut <= all.length; cut++) {
    const p = new Parser({ crc: true });
    const got = [];
    p.feed(all.subarray(0, cut), (f) => got.push(f));
    p.feed(all.subarray(cut), (f) => got.push(f));
    assert.equal(got.length, 3, `cut ${cut}`);
    assert.equal(Buffer.from(got[0].payload).toString(), 'payload\r\nwith CRLF');
    assert.equal(got[0].crc, crc32(b('payload\r\nwith CRLF')));
    assert.equal(got[1].reply, 'r');
    assert.equal(got[1].crc, crc32(hdr, b('p')));
    assert.equal(got[2].sid, '3');
    assert.equal(Buffer.from(got[2].header).toString(), hdr.toString());
  }
});
