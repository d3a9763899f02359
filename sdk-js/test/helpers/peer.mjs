// A scripted stand-in for a Fibril server, for what no real server does on
// demand (answer not_leader, hold confirms back): a net.Server on
// 127.0.0.1:0 that sends INFO, answers CONNECT with +OK and PING with PONG,
// and answers every other command, in order (SPEC.md 4), with what
// answer(cmd, conn) returns: a line such as '+OK 0:1' or "-ERR 'not_leader'",
// or null to answer nothing (the answers after it are then held back too, as
// strict answers require). PUB and HPUB are read whole (CRC mode or not, as
// CONNECT asked). Every command is recorded in conn.cmds. Closed in t.after.
import net from 'node:net';

/** fakePeer starts the peer; info is merged into its INFO. */
export async function fakePeer(t, { info = {}, answer = () => '+OK' } = {}) {
  const conns = [];
  const socks = new Set();
  const server = net.createServer((sock) => {
    socks.add(sock);
    sock.on('error', () => {});
    sock.on('close', () => socks.delete(sock));
    const conn = { sock, cmds: [], crc: false, held: false };
    conns.push(conn);
    sock.write(`INFO ${JSON.stringify({ server_id: 'peer', fibril: 1, max_payload: 1 << 20, headers: true, ...info })}\r\n`);
    let buf = Buffer.alloc(0);
    sock.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const eol = buf.indexOf('\r\n');
        if (eol < 0) return;
        const line = buf.subarray(0, eol).toString();
        const args = line.split(' ');
        const op = args[0].toUpperCase();
        let cmd = { op, args: args.slice(1), line };
        let used = eol + 2;
        if (op === 'PUB' || op === 'HPUB') {
          const sizeAt = args.length - (conn.crc ? 2 : 1);
          const size = Number(args[sizeAt]);
          if (buf.length < used + size + 2) return; // the body is not all here yet
          const body = buf.subarray(used, used + size);
          const hdr = op === 'HPUB' ? Number(args[sizeAt - 1]) : 0;
          cmd = { ...cmd, subject: args[1], header: body.subarray(0, hdr).toString(), payload: body.subarray(hdr).toString() };
          used += size + 2;
        }
        buf = buf.subarray(used);
        conn.cmds.push(cmd);
        let reply;
        if (op === 'CONNECT') {
          conn.crc = JSON.parse(line.slice(8)).crc === true;
          reply = '+OK';
        } else if (op === 'PING') {
          reply = 'PONG';
        } else if (op === 'PONG') {
          continue;
        } else {
          reply = answer(cmd, conn);
        }
        if (reply === null) conn.held = true;
        if (!conn.held && !sock.destroyed) sock.write(reply + '\r\n');
      }
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const addr = `127.0.0.1:${server.address().port}`;
  t.after(() => {
    for (const s of socks) s.destroy();
    server.close();
  });
  return {
    addr,
    url: `nats://${addr}`,
    conns,
    /** pubs lists the payloads of the PUBs and HPUBs connection i received. */
    pubs: (i) => conns[i].cmds.filter((c) => c.op === 'PUB' || c.op === 'HPUB').map((c) => c.payload),
    /** cut closes every connection. */
    cut: () => {
      for (const s of socks) s.destroy();
    },
  };
}

/** deadAddr returns a 127.0.0.1 address nothing listens on (just released). */
export async function deadAddr() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const addr = `127.0.0.1:${s.address().port}`;
  await new Promise((r) => s.close(r));
  return addr;
}
