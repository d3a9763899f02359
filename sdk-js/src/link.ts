// Link: one TCP (or TLS) connection to one server, through the handshake
// (SPEC.md "Connecting"): read INFO, upgrade to TLS if asked, send CONNECT
// and PING, wait for +OK and PONG. After that the owner receives frames.
import * as net from 'node:net';
import * as tls from 'node:tls';
import { encodeConnect, encodePing, encodePong } from './encoder.js';
import { errorFromWire, FibrilError, NotFibrilError, ProtocolViolationError, TimeoutError } from './errors.js';
import type { ServerAddr, Resolved } from './options.js';
import { type Command, Direction, type ParseFailure, Parser } from './parser.js';

/** VERSION is this SDK's version, sent in CONNECT. */
export const VERSION = '0.1.0';

/** ServerInfo is the server's INFO (NATS fields plus Fibril's). */
export interface ServerInfo {
  server_id?: string;
  server_name?: string;
  version?: string;
  proto?: number;
  host?: string;
  port?: number;
  headers?: boolean;
  max_payload?: number;
  auth_required?: boolean;
  tls_required?: boolean;
  tls_available?: boolean;
  fibril?: number;
  max_unconfirmed?: number;
  heartbeat_ms?: number;
  max_inflight?: number;
  crc?: boolean;
  max_control_line?: number;
  [k: string]: unknown;
}

/**
 * Link is an established connection. Set onCommand and onClose right after
 * openLink resolves; frames that arrive in the same chunk as the handshake's
 * PONG are held until then.
 */
export class Link {
  /** socket is the (possibly TLS) socket. */
  socket: net.Socket;
  /** parser parses this link's bytes. */
  readonly parser: Parser;
  /** info is the latest INFO. */
  info: ServerInfo = {};
  /** addr is the server this link is connected to. */
  readonly addr: ServerAddr;
  /** fatal is the fatal error the server sent before closing, if any. */
  fatal: FibrilError | undefined;
  /** lastRx is Date.now() of the last bytes received. */
  lastRx = Date.now();
  /** onCommand receives every frame after the handshake. */
  onCommand: (f: Command) => void = () => {};
  /** onClose is called once when the socket closes; err says why. */
  onClose: (err: unknown) => void = () => {};
  /** held keeps frames that arrive between the handshake and takeOver. */
  readonly held: Command[] = [];
  #closed = false;
  #closeErr: unknown;
  #out: Buffer[] = [];
  #outScheduled = false;

  /** Creates a link over a connected socket. */
  constructor(socket: net.Socket, addr: ServerAddr, parser: Parser) {
    this.socket = socket;
    this.addr = addr;
    this.parser = parser;
  }

  /** closed says whether the socket has closed. */
  get closed(): boolean {
    return this.#closed;
  }

  /** write queues bytes; queued writes go out together at the end of the tick. */
  write(b: Buffer): void {
    if (this.#closed) return;
    this.#out.push(b);
    if (!this.#outScheduled) {
      this.#outScheduled = true;
      queueMicrotask(() => this.flushWrites());
    }
  }

  /** flushWrites writes queued bytes now. */
  flushWrites(): void {
    this.#outScheduled = false;
    if (this.#out.length === 0 || this.#closed) return;
    const b = this.#out.length === 1 ? this.#out[0]! : Buffer.concat(this.#out);
    this.#out = [];
    this.socket.write(b);
  }

  /** destroy closes the socket at once; err becomes onClose's argument. */
  destroy(err?: unknown): void {
    if (this.#closeErr === undefined) this.#closeErr = err;
    this.socket.destroy();
  }

  /** end flushes queued writes and half-closes the socket. */
  end(): void {
    this.flushWrites();
    this.socket.end();
  }

  /**
   * takeOver installs the owner's handlers and replays frames that arrived
   * after the handshake; if the socket already closed, onClose runs at once.
   */
  takeOver(onCommand: (f: Command) => void, onClose: (err: unknown) => void): void {
    this.onCommand = onCommand;
    this.onClose = onClose;
    const held = this.held.splice(0);
    for (const f of held) onCommand(f);
    if (this.#closed) onClose(this.fatal ?? this.#closeErr);
  }

  /** @internal attach wires socket events to the parser and onCommand. */
  attach(sock: net.Socket): void {
    this.socket = sock;
    sock.on('data', (chunk: Buffer) => this.#data(chunk));
    sock.on('error', (e) => {
      if (this.#closeErr === undefined) this.#closeErr = e;
    });
    sock.on('close', () => {
      if (this.#closed) return;
      this.#closed = true;
      this.onClose(this.fatal ?? this.#closeErr);
    });
  }

  #handler = {
    command: (c: Command) => {
      if (c.op === 'PING') {
        this.write(encodePong());
        return;
      }
      if (c.op === 'INFO') {
        try {
          this.info = JSON.parse(c.json!) as ServerInfo;
        } catch (e) {
          this.destroy(new ProtocolViolationError('INFO is not JSON', { cause: e }));
          return;
        }
        // INFO's max_control_line bounds what this client sends (ackAll
        // batches by it), not what the server sends: a relayed MSG line
        // carries the publisher's subject and reply plus a sid, so it can be
        // longer than any line the server accepts. Lines from the server get
        // CLIENT_MAX_LINE, as in the Go and Python SDKs.
        const lim = this.parser.limits;
        if (typeof this.info.max_payload === 'number') lim.maxPayload = this.info.max_payload;
        this.parser.setLimits(lim);
      }
      this.onCommand(c);
    },
    error: (e: ParseFailure) => this.onParseError(e),
  };

  /** onParseError receives non-fatal parse errors (e.g. a corrupt delivery). */
  onParseError: (e: ParseFailure) => void = () => {};

  #data(chunk: Buffer): void {
    this.lastRx = Date.now();
    try {
      this.parser.feed(chunk, this.#handler);
    } catch (e) {
      this.destroy(new ProtocolViolationError(`cannot parse server data: ${(e as Error).message}`, { cause: e }));
    }
  }
}

function connectJSON(o: Resolved, addr: ServerAddr, tlsOn: boolean): Record<string, unknown> {
  const c: Record<string, unknown> = {
    verbose: false,
    pedantic: false,
    tls_required: tlsOn,
    lang: 'node',
    version: VERSION,
    protocol: 1,
    headers: true,
    fibril: 1,
    confirm: true,
    crc: o.crc,
  };
  if (o.name !== undefined) c.name = o.name;
  // Credentials in the options win over those in the server URL.
  const fromOpts = o.token !== undefined || o.user !== undefined;
  const token = fromOpts ? o.token : addr.token;
  const user = fromOpts ? o.user : addr.user;
  if (token !== undefined) c.auth_token = token;
  if (user !== undefined) {
    c.user = user;
    c.pass = fromOpts ? o.pass : addr.pass;
  }
  return c;
}

/** CLIENT_MAX_LINE is the longest line accepted from the server (1 MiB). */
const CLIENT_MAX_LINE = 1 << 20;

/**
 * openLink connects to addr and completes the handshake. It rejects with
 * the server's typed error (e.g. an authorization error), a TimeoutError
 * after o.timeoutMs, the socket error, or signal's reason.
 */
export function openLink(addr: ServerAddr, o: Resolved, signal?: AbortSignal): Promise<Link> {
  return new Promise<Link>((resolve, reject) => {
    const parser = new Parser(Direction.ServerToClient);
    parser.setLimits({ ...parser.limits, maxControlLine: CLIENT_MAX_LINE, maxJSONLine: CLIENT_MAX_LINE });
    const raw = net.connect({ host: addr.host, port: addr.port });
    raw.setNoDelay(true);
    const link = new Link(raw, addr, parser);
    let phase: 'info' | 'connect' | 'pong' | 'done' = 'info';
    const fail = (e: unknown) => {
      if (phase === 'done') return;
      phase = 'done';
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      link.onClose = () => {};
      link.socket.destroy();
      reject(e);
    };
    const onAbort = () => fail(signal!.reason);
    if (signal?.aborted) {
      queueMicrotask(onAbort);
    } else {
      signal?.addEventListener('abort', onAbort, { once: true });
    }
    const timer = setTimeout(() => fail(new TimeoutError(`handshake with ${addr.url} timed out`)), o.timeoutMs);
    link.onClose = (err) => fail(err ?? new ProtocolViolationError(`${addr.url} closed the connection during the handshake`));
    const sendConnect = () => {
      link.write(encodeConnect(connectJSON(o, addr, o.tls !== undefined)));
      link.write(encodePing());
      // The server handles CONNECT before anything after it, so every frame it
      // sends from now on is in the requested mode.
      parser.setCRC(o.crc);
      phase = 'connect';
    };
    link.onCommand = (f: Command) => {
      if (phase === 'done') return;
      if (f.op === '-ERR') {
        fail(errorFromWire(f.text!));
        return;
      }
      switch (phase) {
        case 'info': {
          if (f.op !== 'INFO') return fail(new ProtocolViolationError(`expected INFO, got ${f.op}`));
          if (link.info.fibril === undefined) {
            return fail(new NotFibrilError(`${addr.url} does not speak Fibril (no "fibril" in its INFO: a plain NATS server?)`));
          }
          if (o.tls !== undefined || link.info.tls_required === true) {
            // NATS-style upgrade: INFO in clear, then the TLS handshake.
            raw.removeAllListeners('data');
            const ts = tls.connect({ host: addr.host, servername: net.isIP(addr.host) ? undefined : addr.host, ...o.tls, socket: raw });
            ts.once('secureConnect', sendConnect);
            ts.on('error', (e) => fail(e));
            link.attach(ts);
          } else {
            sendConnect();
          }
          return;
        }
        case 'connect':
          if (f.op === '+OK') {
            phase = 'pong';
            return;
          }
          if (f.op === 'INFO') return;
          return fail(new ProtocolViolationError(`expected +OK to CONNECT, got ${f.op}`));
        case 'pong':
          if (f.op === 'PONG') {
            phase = 'done';
            clearTimeout(timer);
            signal?.removeEventListener('abort', onAbort);
            link.onCommand = (g) => link.held.push(g);
            link.onClose = () => {};
            resolve(link);
            return;
          }
          if (f.op === 'INFO') return;
          return fail(new ProtocolViolationError(`expected PONG, got ${f.op}`));
      }
    };
    link.attach(raw);
  });
}
