// A fault-injecting TCP proxy for tests: forwards bytes both ways and, in
// the server→client direction, replaces the first occurrence of `find` with
// `replace` (same length, so framing stays intact and only the checksum
// breaks). It can also cut its connections or turn them into black holes.
// Closed in t.after.
import net from 'node:net';

export async function corruptingProxy(t, target, find, replace) {
  const from = Buffer.from(find);
  const to = Buffer.from(replace);
  if (from.length !== to.length) throw new Error('find and replace must have the same length');
  const state = { hits: 0, armed: true, connections: 0 };
  const socks = new Set();
  const pairs = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, '127.0.0.1');
    socks.add(client).add(upstream);
    const pair = { client, upstream, dead: false };
    pairs.add(pair);
    state.connections++;
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('data', (d) => {
      if (!pair.dead) upstream.write(d);
    });
    let held = Buffer.alloc(0);
    upstream.on('data', (chunk) => {
      if (pair.dead) return;
      let buf = Buffer.concat([held, chunk]);
      held = Buffer.alloc(0);
      if (state.armed) {
        const i = buf.indexOf(from);
        if (i >= 0) {
          to.copy(buf, i);
          state.armed = false;
          state.hits++;
        } else {
          // Hold back a tail that could be the start of the marker.
          for (let k = Math.min(from.length - 1, buf.length); k > 0; k--) {
            if (from.subarray(0, k).equals(buf.subarray(buf.length - k))) {
              held = buf.subarray(buf.length - k);
              buf = buf.subarray(0, buf.length - k);
              break;
            }
          }
        }
      }
      if (buf.length > 0) client.write(buf);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => {
    for (const s of socks) s.destroy();
    server.close();
  });
  return {
    url: `nats://127.0.0.1:${server.address().port}`,
    state,
    arm: () => (state.armed = true),
    /** cut closes every current connection (both sides). */
    cut: () => {
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      pairs.clear();
    },
    /** blackhole makes every current connection drop all bytes silently, both ways. */
    blackhole: () => {
      for (const p of pairs) p.dead = true;
      pairs.clear();
    },
  };
}
