// Property test of the parser, seeded from the shared vectors: mutated wire
// bytes parse to the same events and consumed count whatever the split, and
// every failure is a typed FibrilError, never another exception or a hang.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Parser, Direction, FibrilError } from '../dist/index.js';
import { repoRoot } from './helpers/server.mjs';

const dir = join(repoRoot, 'conformance/vectors');
const FILES = ['client_to_server.json', 'server_to_client.json', 'crc.json', 'invalid.json'];

function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

function parse(dir_, crc, wire, cuts) {
  const p = new Parser(dir_, { maxControlLine: 256, maxPayload: 512 });
  p.setCRC(crc);
  const ev = [];
  const h = {
    command: (c) => {
      const o = { ...c };
      for (const k of ['header', 'payload']) if (o[k] !== undefined) o[k] = Buffer.from(o[k]).toString('latin1');
      ev.push(JSON.stringify(o, (k, v) => (typeof v === 'bigint' ? String(v) : v)));
    },
    error: (e) => {
      assert.ok(e instanceof FibrilError, `non-fatal error of the wrong type: ${e}`);
      ev.push(`error:${e.code}`);
    },
  };
  let at = 0;
  try {
    for (const c of [...cuts, wire.length]) {
      p.feed(wire.subarray(at, c), h);
      at = c;
    }
  } catch (e) {
    assert.ok(e instanceof FibrilError, `fatal error of the wrong type: ${e?.stack ?? e}`);
    ev.push(`fatal:${e.code}`);
  }
  return { ev, consumed: p.consumed };
}

test('fuzz: mutated vectors parse the same in any split and fail only with typed errors', () => {
  const seeds = [];
  for (const f of FILES) {
    const d = JSON.parse(readFileSync(join(dir, f), 'utf8'));
    for (const v of d.vectors ?? d) seeds.push(v);
  }
  const r = rng(0xf1b1);
  const noise = [0x0d, 0x0a, 0x20, 0x09, 0x2e, 0x2a, 0x3e, 0x24, 0x2d, 0x30, 0x39, 0xff, 0x00, 0x27];
  let runs = 0;
  for (let iter = 0; iter < 1500; iter++) {
    const v = seeds[Math.floor(r() * seeds.length)];
    const wire = Buffer.from(v.wire, 'latin1');
    const m = Buffer.from(wire);
    const edits = 1 + Math.floor(r() * 3);
    let bytes = [...m];
    for (let e = 0; e < edits; e++) {
      const i = Math.floor(r() * (bytes.length + 1));
      const op = r();
      if (op < 0.4 && bytes.length > 0) bytes[Math.min(i, bytes.length - 1)] = noise[Math.floor(r() * noise.length)];
      else if (op < 0.7) bytes.splice(i, 0, noise[Math.floor(r() * noise.length)]);
      else if (bytes.length > 0) bytes.splice(Math.min(i, bytes.length - 1), 1);
    }
    const mutated = Buffer.from(bytes);
    const dirName = v.direction === 'client_to_server' ? Direction.ClientToServer : Direction.ServerToClient;
    const whole = parse(dirName, v.crc, mutated, []);
    const cuts = [];
    for (let i = 1; i < mutated.length; i++) if (r() < 0.2) cuts.push(i);
    const split = parse(dirName, v.crc, mutated, cuts);
    assert.deepEqual(split, whole, `split changed the result for ${JSON.stringify(mutated.toString('latin1'))}`);
    assert.ok(whole.consumed <= mutated.length);
    runs++;
  }
  assert.equal(runs, 1500);
});
