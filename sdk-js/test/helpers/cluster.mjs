// Test helper: a cluster of `fibril serve` processes on loopback, for the
// conformance runner's cluster scenarios (conformance/README.md, "Clusters").
// Certificates come from `fibril certs`; each node has its own data
// directory and an admin listener (--http) whose GET /api/cluster says which
// node leads the metadata group. Every node is killed in t.after (by
// startServer) and by close.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serverBinary, startServer } from './server.mjs';

/** freePorts returns n loopback ports nothing listened on a moment ago. */
async function freePorts(n) {
  const servers = [];
  try {
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      await new Promise((res, rej) => s.listen(0, '127.0.0.1', res).once('error', rej));
      servers.push(s);
    }
    return servers.map((s) => s.address().port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((res) => s.close(res))));
  }
}

async function metaLeader(http) {
  try {
    const r = await fetch(`http://${http}/api/cluster`, { signal: AbortSignal.timeout(1000) });
    const v = await r.json();
    return (v.nodes ?? []).find((n) => n.leader_of_meta)?.name ?? '';
  } catch {
    return '';
  }
}

/**
 * startCluster starts n nodes (n1..n<n>) and resolves once every node names
 * the same metadata leader (before that, TOPIC CREATE is answered
 * not_leader). The result's addrs are the client addresses in node order,
 * the same across restart(i).
 */
export async function startCluster(t, n = 3, timeoutMs = 30000) {
  const bin = serverBinary();
  const dir = mkdtempSync(join(tmpdir(), 'fibril-sdkjs-cluster-'));
  const names = Array.from({ length: n }, (_, i) => `n${i + 1}`);
  const certs = join(dir, 'certs');
  execFileSync(bin, ['certs', '--dir', certs, ...names], { stdio: 'ignore' });
  const ports = await freePorts(3 * n);
  const link = (i) => `127.0.0.1:${ports[i]}`;
  const http = names.map((_, i) => `127.0.0.1:${ports[n + i]}`);
  const clientPorts = ports.slice(2 * n);
  const opts = names.map((name, i) => {
    const dataDir = join(dir, name);
    mkdirSync(dataDir, { recursive: true });
    const peers = names.flatMap((o, j) => (j === i ? [] : [`${o}@${link(j)}`])).join(',');
    return {
      port: clientPorts[i],
      dataDir,
      args: ['--cluster-name', name, '--cluster-listen', link(i), '--cluster-peers', peers,
        '--cluster-ca', join(certs, 'ca.pem'), '--cluster-cert', join(certs, `${name}.pem`),
        '--cluster-key', join(certs, `${name}-key.pem`), '--http', http[i]],
    };
  });
  const nodes = new Array(n);
  const cluster = {
    addrs: clientPorts.map((p) => `127.0.0.1:${p}`),
    /** kill sends node i SIGKILL and waits until it is gone. */
    async kill(i) {
      await nodes[i]?.kill();
      nodes[i] = undefined;
    },
    /** restart starts node i on its address and data directory, retrying while its port is taken. */
    async restart(i) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        try {
          nodes[i] = await startServer(t, opts[i]);
          return;
        } catch (e) {
          if (Date.now() > end) throw e;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    },
    async close() {
      await Promise.all(names.map((_, i) => cluster.kill(i)));
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    },
  };
  try {
    // Started together, in case a node's ready line waits for its peers.
    await Promise.all(names.map((_, i) => cluster.restart(i)));
    const end = Date.now() + timeoutMs;
    for (;;) {
      const leaders = new Set(await Promise.all(http.map(metaLeader)));
      if (leaders.size === 1 && !leaders.has('')) break;
      if (Date.now() > end) throw new Error(`no metadata leader all nodes agree on within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } catch (e) {
    await cluster.close();
    throw e;
  }
  return cluster;
}
