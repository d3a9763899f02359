// Test helper: builds (or takes FIBRIL_BIN) and starts the real `fibril
// serve` on 127.0.0.1 with a temporary data directory, reading its
// --ready-json line. Every server is stopped in t.after.
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, '../../..');
let built;

/** serverBinary returns the path of a fibril binary, building it once per process. */
export function serverBinary() {
  if (process.env.FIBRIL_BIN) return process.env.FIBRIL_BIN;
  if (built) return built;
  if (!existsSync(join(repoRoot, 'cmd/fibril'))) return undefined;
  const dir = mkdtempSync(join(tmpdir(), 'fibril-sdkjs-bin-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, 'fibril');
  execFileSync('go', ['build', '-o', out, './cmd/fibril'], { cwd: repoRoot, stdio: ['ignore', 'inherit', 'inherit'] });
  built = out;
  return out;
}

/**
 * startServer starts `fibril serve` and resolves once it printed its ready
 * line. opts.port reuses a port (restarts), opts.dataDir a data directory,
 * opts.args adds flags. Skips the test when no binary can be had.
 */
export async function startServer(t, opts = {}) {
  const bin = serverBinary();
  if (bin === undefined) {
    t.skip('no fibril server in this tree (cmd/fibril missing) and FIBRIL_BIN unset');
    return undefined;
  }
  const ownDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'fibril-sdkjs-data-'));
  const args = ['serve', '-ready-json', '-listen', `127.0.0.1:${opts.port ?? 0}`, '-data', dataDir, '-log-level', 'warn', ...(opts.args ?? [])];
  const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => {
    stderr += d;
    if (stderr.length > 20000) stderr = stderr.slice(-10000);
  });
  const exited = new Promise((res) => proc.once('exit', (code, sig) => res({ code, sig })));
  const lines = createInterface({ input: proc.stdout });
  const ready = await new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`fibril serve gave no ready line in 15s; stderr: ${stderr}`)), 15000);
    lines.once('line', (l) => {
      clearTimeout(timer);
      try {
        res(JSON.parse(l));
      } catch (e) {
        rej(new Error(`bad ready line ${l}: ${e}`));
      }
    });
    exited.then(({ code }) => {
      clearTimeout(timer);
      rej(new Error(`fibril serve exited (${code}) before ready; stderr: ${stderr}`));
    });
  });
  const port = Number(ready.addr.split(':').pop());
  const srv = {
    ready,
    addr: ready.addr,
    url: `nats://${ready.addr}`,
    port,
    dataDir,
    proc,
    exited,
    stderr: () => stderr,
    /** stop sends SIGTERM and waits for exit. */
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      return exited;
    },
    /** kill sends SIGKILL (a crash) and waits for exit. */
    async kill() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      return exited;
    },
  };
  // One hook, in this order: the server must be gone before its directory is
  // removed (hooks registered separately could run the other way round).
  t.after(async () => {
    await srv.kill();
    // Best effort: a restarted server on the same directory may still be
    // running until its own hook; a leftover temp directory harms nobody.
    if (ownDir) {
      try {
        rmSync(dataDir, { recursive: true, force: true, maxRetries: 3 });
      } catch {
        process.once('exit', () => {
          try {
            rmSync(dataDir, { recursive: true, force: true });
          } catch {
            // left in the temp directory
          }
        });
      }
    }
  });
  return srv;
}

/** waitFor polls cond every 10 ms until it returns a truthy value or the deadline passes. */
export async function waitFor(cond, { timeout = 10000, what = 'condition' } = {}) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
