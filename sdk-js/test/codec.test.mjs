// Headers, handles, errors, options: the pieces around the parser.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  MsgHeaders, parseHandle, formatHandle, errorFromWire, FibrilError, ERROR_TABLE, ERROR_CLASSES,
  InvalidArgumentError, parseServer, backoff, parsePosition, encodeSub, encodeNack, encodeManage, encodePub, encodePoll,
} from '../dist/index.js';

test('headers: encode/decode round trip keeps order, case and repeats', () => {
  const h = new MsgHeaders({ 'Fibril-Key': 'k1', 'X-Multi': ['a', 'b'] });
  const block = h.encode();
  assert.equal(Buffer.from(block).toString(), 'NATS/1.0\r\nFibril-Key: k1\r\nX-Multi: a\r\nX-Multi: b\r\n\r\n');
  const d = MsgHeaders.decode(block);
  assert.equal(d.get('fibril-key'), 'k1');
  assert.deepEqual(d.getAll('x-multi'), ['a', 'b']);
  assert.deepEqual([...d], [['Fibril-Key', 'k1'], ['X-Multi', 'a'], ['X-Multi', 'b']]);
});

test('headers: status line and bad input', () => {
  const d = MsgHeaders.decode(Buffer.from('NATS/1.0 503 No Responders\r\n\r\n'));
  assert.equal(d.status, '503');
  assert.equal(d.description, 'No Responders');
  assert.equal(d.size, 0);
  assert.throws(() => MsgHeaders.decode(Buffer.from('HTTP/1.1\r\n\r\n')), FibrilError);
  assert.throws(() => new MsgHeaders().append('A', 'x\r\ny'), InvalidArgumentError);
  assert.throws(() => new MsgHeaders().append('A B', 'x'), InvalidArgumentError);
});

test('handles: parse, format, reject', () => {
  const h = parseHandle('$F.3.4.1.99.2');
  assert.deepEqual(h, { topicId: 3n, groupId: 4n, partition: 1, seq: 99n, attempt: 2 });
  assert.equal(formatHandle(h), '$F.3.4.1.99.2');
  const max = '$F.18446744073709551615.18446744073709551615.4294967295.18446744073709551615.4294967295';
  assert.equal(formatHandle(parseHandle(max)), max);
  assert.equal(parseHandle(max).seq, 2n ** 64n - 1n);
  for (const bad of ['', '_INBOX.x', '$F.1.2.3.4', '$F.1.2.3.4.0', '$F.0.2.3.4.1', '$F.1.2.3.0.1', '$F.1.2.3.04.1', '$F.a.2.3.4.1',
    '$F.18446744073709551616.1.0.1.1', '$F.1.1.4294967296.1.1', '$F.1.1.0.1.4294967296', '$F.1.2.3.4.1.6']) {
    assert.equal(parseHandle(bad), undefined, bad);
  }
});

test('errors: wire text maps to the generated class by code', () => {
  const codes = Object.keys(ERROR_TABLE);
  assert.ok(codes.length > 0);
  for (const code of codes) {
    const spec = ERROR_TABLE[code];
    const e = errorFromWire(`${code} something happened`);
    assert.ok(e instanceof ERROR_CLASSES[code], code);
    assert.ok(e instanceof FibrilError);
    assert.equal(e.code, code);
    assert.equal(e.retriable, spec.retriable, code);
    assert.equal(e.fatal, spec.fatal, code);
    assert.equal(e.message, 'something happened');
  }
  const u = errorFromWire('made_up_code text');
  assert.equal(u.code, 'made_up_code');
  assert.equal(u.retriable, false);
  assert.equal(errorFromWire('Authorization Violation').code, 'auth_violation');
  assert.equal(errorFromWire('Authorization Violation').fatal, true);
  assert.equal(errorFromWire('Something Else Entirely').code, 'unknown');
});

test('errors: cause is kept', () => {
  const cause = new Error('inner');
  const cls = Object.values(ERROR_CLASSES)[0];
  assert.equal(new cls('x', { cause }).cause, cause);
});

test('options: servers and backoff', () => {
  assert.deepEqual(parseServer('127.0.0.1:4333'), { host: '127.0.0.1', port: 4333, tls: false, url: '127.0.0.1:4333' });
  assert.deepEqual(parseServer('tls://example.test'), { host: 'example.test', port: 4222, tls: true, url: 'tls://example.test' });
  assert.deepEqual(parseServer('[::1]:5'), { host: '::1', port: 5, tls: false, url: '[::1]:5' });
  assert.throws(() => parseServer('http://x'), InvalidArgumentError);
  const r = { maxAttempts: -1, initialDelayMs: 100, maxDelayMs: 1000, jitter: 0 };
  assert.deepEqual([0, 1, 2, 3, 4, 10].map((n) => backoff(r, n)), [100, 200, 400, 800, 1000, 1000]);
  const j = { ...r, jitter: 0.5 };
  assert.equal(backoff(j, 0, () => 0), 50);
  assert.equal(backoff(j, 0, () => 1), 150);
});

test('positions', () => {
  assert.deepEqual(parsePosition('2:17'), { partition: 2, seq: 17n, duplicate: false });
  assert.deepEqual(parsePosition('0:18446744073709551615'), { partition: 0, seq: 2n ** 64n - 1n, duplicate: false });
  assert.deepEqual(parsePosition('2:17 duplicate'), { partition: 2, seq: 17n, duplicate: true });
  assert.equal(parsePosition('2:17 dup'), undefined);
  assert.equal(parsePosition('0:18446744073709551616'), undefined);
  assert.equal(parsePosition('-'), null);
  assert.equal(parsePosition('x'), undefined);
  assert.equal(parsePosition('1:'), undefined);
});

test('encoders validate their arguments', () => {
  assert.equal(encodeSub('orders', '4', 'billing', 8).toString(), 'SUB orders billing 4 8\r\n');
  assert.equal(encodeNack('$F.1.1.0.1.1', 250).toString(), 'NACK $F.1.1.0.1.1 250\r\n');
  assert.equal(encodeManage('TOPIC', 'CREATE', ['t'], { partitions: 2 }).toString(), 'TOPIC CREATE t {"partitions":2}\r\n');
  assert.equal(encodePub({ subject: 'a', payload: Buffer.from('hi'), crc: null }).toString(), 'PUB a 2 -\r\nhi\r\n');
  assert.throws(() => encodeSub('a b', '1'), (e) => e.code === 'invalid_subject');
  assert.throws(() => encodeSub('a', '1', undefined, 3), InvalidArgumentError);
  assert.throws(() => encodePub({ subject: 'a.*', payload: Buffer.alloc(0) }), (e) => e.code === 'wildcard_not_allowed');
  assert.throws(() => encodePub({ subject: '', payload: Buffer.alloc(0) }), (e) => e.code === 'invalid_subject');
  assert.throws(() => encodePoll('t', 'bad.group', 1), (e) => e.code === 'invalid_name');
  assert.throws(() => encodeNack('h', -1), InvalidArgumentError);
});
