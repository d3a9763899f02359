// Every shared wire vector (conformance/vectors, format in its README)
// through this SDK's parser and encoder: whole, byte at a time and in
// random chunks, plus the handle, subject and ack-body tables.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  Parser, Direction, encodeCommand, parseHandle, formatHandle, checkSubject, parseAckBody, parsePosition, errorFromWire,
} from '../dist/index.js';
import { repoRoot } from './helpers/server.mjs';

const dir = join(repoRoot, 'conformance/vectors');
const load = (f) => {
  const d = JSON.parse(readFileSync(join(dir, f), 'utf8'));
  return Array.isArray(d) ? d : d.vectors;
};
const bytes = (s) => Buffer.from(s ?? '', 'latin1');
const utf8ToLatin1 = (s) => Buffer.from(s, 'utf8').toString('latin1');
const FRAME_FILES = ['client_to_server.json', 'server_to_client.json', 'crc.json', 'invalid.json'];

/** norm drops empty, zero and false fields: "an absent field means empty (or 0, or false)". */
function norm(ev) {
  const o = {};
  for (const [k, v] of Object.entries(ev)) {
    if (v === undefined || v === '' || v === 0 || v === false || (Array.isArray(v) && v.length === 0)) continue;
    o[k] = v;
  }
  return o;
}

/** event turns a parsed Command into the vector event form. */
function event(c) {
  const text = (s) => (s === undefined ? undefined : utf8ToLatin1(s));
  const bin = (b) => (b === undefined ? undefined : Buffer.from(b).toString('latin1'));
  return norm({
    op: c.op,
    subject: text(c.subject),
    reply: text(c.reply),
    group: text(c.group),
    sid: text(c.sid),
    header: bin(c.header),
    payload: bin(c.payload),
    crc: c.crc === undefined ? undefined : c.crc.toString(16).padStart(8, '0'),
    has_crc: c.hasCRC,
    max: c.max,
    millis: c.millis,
    handles: c.handles?.map(formatHandle),
    text: text(c.text),
    json: text(c.json),
  });
}

/** command turns a vector event back into a Command for encodeCommand. */
function command(ev) {
  const s = (k) => (ev[k] === undefined ? undefined : bytes(ev[k]).toString('utf8'));
  const c = { op: ev.op };
  for (const k of ['subject', 'reply', 'group', 'sid', 'text', 'json']) if (ev[k] !== undefined) c[k] = s(k);
  if (ev.header !== undefined) c.header = bytes(ev.header);
  if (ev.payload !== undefined) c.payload = bytes(ev.payload);
  if (ev.has_crc) c.hasCRC = true;
  if (ev.max) c.max = ev.max;
  if (ev.millis) c.millis = ev.millis;
  if (ev.handles) c.handles = ev.handles.map((h) => parseHandle(h));
  return c;
}

/** run parses wire split into the given chunks; returns events and consumed count. */
function run(v, chunks) {
  const dirName = v.direction === 'client_to_server' ? Direction.ClientToServer : Direction.ServerToClient;
  const lim = v.limits ?? {};
  const p = new Parser(dirName, { maxControlLine: lim.max_control_line, maxPayload: lim.max_payload });
  p.setCRC(v.crc);
  const events = [];
  const h = {
    command(c) {
      events.push(event(c));
      if (v.crc_after_connect && c.op === 'CONNECT') p.setCRC(true);
    },
    error(e) {
      events.push({ error: e.code, fatal: e.fatal });
    },
  };
  for (const ch of chunks) {
    try {
      p.feed(ch, h);
    } catch (e) {
      if (e?.code === undefined) throw e;
      events.push({ error: e.code, fatal: e.fatal });
      break;
    }
  }
  return { events, consumed: p.consumed };
}

function splits(wire, seed) {
  const out = { whole: [wire], bytewise: [...wire].map((b) => Buffer.from([b])) };
  let x = seed;
  const rand = () => ((x = (x * 1103515245 + 12345) % 2 ** 31), x / 2 ** 31);
  for (let r = 0; r < 3; r++) {
    const parts = [];
    for (let i = 0; i < wire.length; ) {
      const n = 1 + Math.floor(rand() * 16);
      parts.push(wire.subarray(i, i + n));
      i += n;
    }
    out[`random${r}`] = parts;
  }
  return out;
}

test('vectors: every frame vector through the parser, in any split', () => {
  let count = 0;
  for (const f of FRAME_FILES) {
    for (const v of load(f)) {
      const want = v.events.map((e) => ('error' in e ? e : norm(e)));
      const wire = bytes(v.wire);
      for (const [how, chunks] of Object.entries(splits(wire, count + 1))) {
        const got = run(v, chunks);
        assert.deepEqual(got.events, want, `${f} ${v.name} (${how})`);
        assert.equal(got.consumed, v.consumed, `${f} ${v.name} consumed (${how})`);
      }
      count++;
    }
  }
  assert.ok(count >= 80, `only ${count} frame vectors found`);
});

test('vectors: canonical vectors re-encode to their wire bytes', () => {
  let count = 0;
  for (const f of FRAME_FILES) {
    for (const v of load(f)) {
      if (!v.canonical) continue;
      let crc = v.crc;
      const parts = [];
      for (const ev of v.events) {
        assert.ok(!('error' in ev), `${v.name}: canonical vector with an error event`);
        parts.push(encodeCommand(command(ev), crc));
        if (v.crc_after_connect && ev.op === 'CONNECT') crc = true;
      }
      assert.equal(Buffer.concat(parts).toString('latin1'), v.wire, `${f} ${v.name}`);
      count++;
    }
  }
  assert.ok(count > 0);
});

test('vectors: handles', () => {
  for (const v of load('handles.json')) {
    const h = parseHandle(v.wire);
    if (v.error) {
      assert.equal(h, undefined, v.wire);
      continue;
    }
    assert.ok(h, v.wire);
    assert.deepEqual(
      { topic: String(h.topicId), group: String(h.groupId), partition: String(h.partition), seq: String(h.seq), attempt: String(h.attempt) },
      v.handle,
      v.wire,
    );
    assert.equal(formatHandle(h), v.wire);
  }
});

test('vectors: subjects', () => {
  for (const v of load('subjects.json')) {
    const code = checkSubject(bytes(v.subject), v.wildcards);
    assert.equal(code, v.error ?? '', JSON.stringify(v));
  }
});

test('vectors: ack bodies', () => {
  for (const v of load('ack_bodies.json')) {
    const r = parseAckBody(bytes(v.body).toString('latin1'));
    if (v.error) {
      assert.equal(r, undefined, JSON.stringify(v.body));
      continue;
    }
    assert.deepEqual(r, { kind: v.kind, delayNs: BigInt(v.delay_ns) }, JSON.stringify(v.body));
  }
});

test('vectors: publish confirms', () => {
  for (const v of load('confirms.json')) {
    const p = parsePosition(bytes(v.text).toString('utf8'));
    if (v.error) assert.equal(p, undefined, JSON.stringify(v));
    else if (!v.stored) assert.equal(p, null, JSON.stringify(v));
    else assert.deepEqual(p, { partition: v.partition, seq: BigInt(v.seq), duplicate: v.duplicate === true }, JSON.stringify(v));
  }
});

test('vectors: -ERR texts map to codes and details', () => {
  for (const v of load('err_texts.json')) {
    const e = errorFromWire(bytes(v.text).toString('utf8'));
    assert.equal(e.code, v.code, JSON.stringify(v));
    assert.equal(e.detail, v.detail, JSON.stringify(v));
  }
});

test('vectors: every vector file is exercised', () => {
  const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  const known = [...FRAME_FILES, 'handles.json', 'subjects.json', 'ack_bodies.json', 'confirms.json', 'err_texts.json'];
  assert.deepEqual(files, known.sort(), 'a new vector file appeared: run it here');
});
