// Runs the language-neutral conformance scenarios (conformance/scenarios,
// format in conformance/README.md) with this SDK against the real server.
// Scenarios listed in conformance/known_failures.json must still fail
// (this test fails once one passes, so the entry gets removed); "flaky:"
// entries are run and their outcome only logged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from '../dist/index.js';
import { repoRoot, startServer } from './helpers/server.mjs';
import { Runner, missingFeature } from './helpers/conformance.mjs';
import { startCluster } from './helpers/cluster.mjs';

const dir = process.env.FIBRIL_CONFORMANCE_DIR ?? join(repoRoot, 'conformance');
const scenarioDir = join(dir, 'scenarios');
// FIBRIL_CONFORMANCE_JSONL=<file> appends one result line per scenario, for
// `go run ./cmd/fibril-conformance -merge <file>`.
const jsonl = process.env.FIBRIL_CONFORMANCE_JSONL;
const record = (scenario, status, detail) => {
  if (jsonl) appendFileSync(jsonl, JSON.stringify({ scenario, runner: 'js-sdk', status, detail }) + '\n');
};

test('conformance scenarios (js-sdk runner)', async (t) => {
  if (!existsSync(scenarioDir)) return t.skip(`no scenarios at ${scenarioDir}`);
  const files = readdirSync(scenarioDir).filter((f) => f.endsWith('.json')).sort();
  assert.ok(files.length > 0);
  const known = existsSync(join(dir, 'known_failures.json')) ? JSON.parse(readFileSync(join(dir, 'known_failures.json'), 'utf8')) : {};
  const shared = await startServer(t);
  if (!shared) return;
  const probe = await connect({ servers: shared.url });
  const info = probe.info;
  await probe.close();

  for (const f of files) {
    const sc = JSON.parse(readFileSync(join(scenarioDir, f), 'utf8'));
    await t.test(sc.name, async (st) => {
      const needsRestart = (sc.requires ?? []).includes('restart');
      const missing = missingFeature(sc, info, true);
      if (missing) {
        record(sc.name, 'skip', `needs ${missing}`);
        return st.skip(`needs ${missing}`);
      }
      let srv = shared;
      if (needsRestart) srv = await startServer(st);
      // A cluster scenario gets a fresh cluster of its own.
      const cluster = sc.cluster ? await startCluster(st, sc.cluster) : undefined;
      const env = cluster ? {
        info,
        url: () => `nats://${cluster.addrs[0]}`,
        servers: () => cluster.addrs.map((a) => `nats://${a}`),
        node: (op, i) => (op === 'kill_node' ? cluster.kill(i) : cluster.restart(i)),
      } : {
        info,
        url: () => srv.url,
        restart: async () => {
          await srv.kill();
          srv = await startServer(st, { port: srv.port, dataDir: srv.dataDir });
        },
      };
      let err;
      try {
        await new Runner(env, sc).run();
      } catch (e) {
        err = e;
      } finally {
        await cluster?.close();
      }
      record(sc.name, err ? 'FAIL' : 'pass', err ? err.message : '');
      const reason = known[sc.name];
      if (reason?.startsWith('flaky:')) {
        st.diagnostic(`known flaky (${reason}): ${err ? `failed: ${err.message}` : 'passed'}`);
        return;
      }
      if (reason !== undefined) {
        assert.ok(err, `known failure "${sc.name}" now passes: remove it from known_failures.json`);
        st.diagnostic(`known failure: ${reason}`);
        return;
      }
      if (err) throw err;
    });
  }
});
