#!/usr/bin/env node
// Runs the test suite: builds the server once (unless FIBRIL_BIN is set or
// the tree has no cmd/fibril), then `node --test` over test/*.test.mjs with
// FIBRIL_BIN pointing at it, so test files do not each build it.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repo = resolve(pkg, '..');
const env = { ...process.env };
let tmp;
if (!env.FIBRIL_BIN && existsSync(join(repo, 'cmd/fibril'))) {
  tmp = mkdtempSync(join(tmpdir(), 'fibril-sdkjs-bin-'));
  env.FIBRIL_BIN = join(tmp, 'fibril');
  execFileSync('go', ['build', '-o', env.FIBRIL_BIN, './cmd/fibril'], { cwd: repo, stdio: 'inherit' });
}
const files = readdirSync(join(pkg, 'test')).filter((f) => f.endsWith('.test.mjs')).sort().map((f) => join('test', f));
const r = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...files, ...process.argv.slice(2)], { cwd: pkg, env, stdio: 'inherit' });
if (tmp) rmSync(tmp, { recursive: true, force: true });
process.exit(r.status ?? 1);
