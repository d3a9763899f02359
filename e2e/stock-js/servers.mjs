// Starts `fibril serve` (built once from ../../cmd/fibril, or $FIBRIL_BIN)
// and nats-server ($NATS_SERVER_BIN, $PATH or ~/go/bin) on free loopback
// ports for the tests, and stops them when each test ends.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

const root = new URL('../../', import.meta.url).pathname;
let built;

function fibrilBin() {
  if (process.env.FIBRIL_BIN) return process.env.FIBRIL_BIN;
  if (!built) {
    built = join(mkdtempSync(join(tmpdir(), 'fibril-stock-js-bin-')), 'fibril');
    execFileSync('go', ['build', '-o', built, './cmd/fibril'], { cwd: root, stdio: 'inherit' });
  }
  return built;
}

function natsServerBin() {
  if (process.env.NATS_SERVER_BIN) return process.env.NATS_SERVER_BIN;
  for (const dir of (process.env.PATH ?? '').split(':').concat(join(homedir(), 'go', 'bin'))) {
    if (dir && existsSync(join(dir, 'nats-server'))) return join(dir, 'nats-server');
  }
  return undefined;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
    s.on('error', reject);
  });
}

/** startFibril starts fibril serve with extra flags; resolves { url, addr }. */
export async function startFibril(t, ...extra) {
  const data = mkdtempSync(join(tmpdir(), 'fibril-stock-js-'));
  const p = spawn(fibrilBin(), ['serve', '--listen', '127.0.0.1:0', '--data', data, '--ready-json', '--log-level', 'warn', ...extra],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => { p.kill('SIGKILL'); rmSync(data, { recursive: true, force: true }); });
  const line = await new Promise((resolve, reject) => {
    let buf = '';
    p.stdout.on('data', (d) => { buf += d; const i = buf.indexOf('\n'); if (i >= 0) resolve(buf.slice(0, i)); });
    p.on('exit', (code) => reject(new Error(`fibril serve exited ${code}`)));
  });
  const ready = JSON.parse(line);
  return { name: 'fibril', url: `nats://${ready.addr}`, ready };
}

/** startNATSServer starts nats-server (no JetStream unless extra says); skips the test without one (fails under CI). */
export async function startNATSServer(t, ...extra) {
  const bin = natsServerBin();
  if (!bin) {
    if (process.env.CI) throw new Error('nats-server not found (.ci/run installs it)');
    t.skip('nats-server not installed');
    return undefined;
  }
  const port = await freePort();
  const p = spawn(bin, ['-a', '127.0.0.1', '-p', String(port), ...extra], { stdio: 'ignore' });
  t.after(() => p.kill('SIGKILL'));
  const { connect } = await import('nats');
  for (let i = 0; i < 200; i++) {
    try { const nc = await connect({ servers: `127.0.0.1:${port}` }); await nc.close(); break; } catch { await new Promise((r) => setTimeout(r, 25)); }
  }
  return { name: 'nats-server', url: `nats://127.0.0.1:${port}` };
}

/** both runs fn against fibril serve and nats-server as subtests. */
export async function both(t, fn) {
  await t.test('fibril', async (st) => fn(st, await startFibril(st)));
  await t.test('nats-server', async (st) => { const s = await startNATSServer(st); if (s) await fn(st, s); });
}

/** bothJS is both with nats-server running JetStream (store in a temporary directory). */
export async function bothJS(t, fn) {
  await t.test('fibril', async (st) => fn(st, await startFibril(st)));
  await t.test('nats-server', async (st) => {
    const sd = mkdtempSync(join(tmpdir(), 'fibril-stock-js-js-'));
    st.after(() => rmSync(sd, { recursive: true, force: true }));
    const s = await startNATSServer(st, '-js', '-sd', sd);
    if (s) await fn(st, s);
  });
}
