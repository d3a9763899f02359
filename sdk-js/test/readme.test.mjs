// Runs every code block of README.md (issue 31: the quickstarts hung; every
// block must run in the tests): the install commands in a copy of the
// package and a fresh project, the quickstart (its output compared with the
// README's) and the worker (SIGTERM'd, it exits within 1 s), each on a new
// server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { connect } from '../dist/index.js';
import { blocks } from '../scripts/readme-blocks.mjs';
import { startServer, waitFor } from './helpers/server.mjs';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const README_URL = 'nats://127.0.0.1:4222';
const all = blocks();
const js = all.filter((b) => b.lang === 'js');
const byFile = (f) => js.find((b) => b.file === f);

function tempDir(t, prefix) {
  const d = mkdtempSync(join(tmpdir(), prefix));
  t.after(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

// project writes the README's js files into dir, pointed at url.
function writeFiles(dir, url) {
  for (const b of js) writeFileSync(join(dir, b.file), b.code.replaceAll(README_URL, url));
}

// linkedProject is a directory where '@fibrilmq/fibril' is this package.
function linkedProject(t, url) {
  const d = tempDir(t, 'fibril-readme-');
  mkdirSync(join(d, 'node_modules', '@fibrilmq'), { recursive: true });
  symlinkSync(pkg, join(d, 'node_modules', '@fibrilmq', 'fibril'));
  writeFiles(d, url);
  return d;
}

test('every README block has a runner', () => {
  const known = (b) => b.lang === 'sh' || (b.lang === 'js' && ['consume.mjs', 'quickstart.mjs', 'worker.mjs'].includes(b.file));
  assert.deepEqual(all.filter((b) => !known(b)).map((b) => b.line), []);
  assert.equal(all.filter((b) => b.lang === 'sh').length, 1);
  assert.ok(byFile('quickstart.mjs').output, 'the quickstart shows its output');
});

test('README quickstart prints what the README says, and again on a second run', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const d = linkedProject(t, srv.url);
  const run = () => spawnSync(process.execPath, ['quickstart.mjs'], { cwd: d, encoding: 'utf8', timeout: 60000 });
  const first = run();
  assert.equal(first.status, 0, first.stderr);
  assert.equal(first.stdout, byFile('quickstart.mjs').output);
  const again = run();
  assert.equal(again.status, 0, again.stderr);
  assert.equal(again.stdout.trim().split('\n').at(-1), 'total 60');
});

test('README worker runs until SIGTERM and exits within 1 s', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const d = linkedProject(t, srv.url);
  const nc = await connect({ servers: srv.url });
  t.after(() => nc.close());
  await nc.topics.create('orders', {}, { existOk: true });
  await nc.groups.create('orders', 'billing', {}, { existOk: true });
  const proc = spawn(process.execPath, ['worker.mjs'], { cwd: d, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (b) => (stderr += b));
  const lines = [];
  createInterface({ input: proc.stdout }).on('line', (l) => lines.push(l));
  const exited = new Promise((r) => proc.once('exit', (code) => r(code)));
  t.after(() => proc.kill('SIGKILL'));
  for (let i = 0; i < 3; i++) await nc.publish('orders', String(i));
  await waitFor(() => lines.length >= 3, { timeout: 15000, what: `three orders (stderr: ${stderr})` });
  assert.deepEqual([...lines].sort(), ['order 0', 'order 1', 'order 2']);
  const t0 = Date.now();
  proc.kill('SIGTERM');
  assert.equal(await exited, 0, stderr);
  const took = Date.now() - t0;
  assert.ok(took < 1000, `the README worker took ${took} ms to stop`);
  const gi = await nc.groups.info('orders', 'billing');
  assert.deepEqual([gi.pending, gi.inflight], [0, 0]);
});

test('README install commands: pack, install the tarball, run the quickstart on it', async (t) => {
  const srv = await startServer(t);
  if (!srv) return;
  const clone = tempDir(t, 'fibril-readme-install-');
  const copy = join(clone, 'sdk-js');
  for (const f of ['package.json', 'package-lock.json', 'tsconfig.json', 'README.md', 'src', 'examples']) {
    cpSync(join(pkg, f), join(copy, f), { recursive: true });
  }
  for (const b of all.filter((x) => x.lang === 'sh')) {
    const r = spawnSync('bash', ['-euo', 'pipefail', '-c', b.code], { cwd: clone, encoding: 'utf8', timeout: 300000 });
    assert.equal(r.status, 0, `README line ${b.line}:\n${r.stdout}\n${r.stderr}`);
  }
  writeFiles(clone, srv.url);
  const out = spawnSync(process.execPath, ['quickstart.mjs'], { cwd: clone, encoding: 'utf8', timeout: 60000 });
  assert.equal(out.status, 0, out.stderr);
  assert.ok(out.stdout.endsWith('total 60\n'), out.stdout);
  const installed = join(clone, 'node_modules', '@fibrilmq', 'fibril');
  assert.ok(!lstatSync(installed).isSymbolicLink() && existsSync(join(installed, 'dist', 'index.js')), 'the tarball is installed');
});
