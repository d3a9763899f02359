// Connection options, their validation (done once, in connect) and the
// reconnect backoff schedule.
import type { ConnectionOptions as TLSConnectionOptions } from 'node:tls';
import { InvalidArgumentError } from './errors.js';

/** ReconnectOptions tune reconnection after a lost connection. */
export interface ReconnectOptions {
  /** maxAttempts is how many servers are tried, one attempt each, before giving up (-1 = forever; default -1). */
  maxAttempts?: number;
  /**
   * initialDelayMs is the delay before each attempt of the first pass over
   * servers; it doubles after each full pass (default 100).
   */
  initialDelayMs?: number;
  /** maxDelayMs caps the backoff delay (default 5000). */
  maxDelayMs?: number;
  /** jitter is the random fraction added to or removed from each delay (default 0.2). */
  jitter?: number;
}

/** ConnectOptions configure connect(). Every field is optional. */
export interface ConnectOptions {
  /**
   * servers: "host:port", "nats://host:port" or "tls://host:port", one or a
   * list (default "127.0.0.1:4222"). connect tries them in order and uses
   * the first that answers; after a lost link the reconnect tries the next
   * one, wrapping around (SPEC.md 11.1).
   */
  servers?: string | string[];
  /**
   * discover adds the servers each INFO lists in connect_urls (the other
   * nodes of a cluster) to the end of servers, once each and up to 64 in
   * all, with the scheme, TLS and credentials of the server that listed
   * them; false keeps to the given servers (default true).
   */
  discover?: boolean;
  /** name is sent in CONNECT and shows in server logs. */
  name?: string;
  /** token authenticates with a token. */
  token?: string;
  /** user and pass authenticate with a user name and password. */
  user?: string;
  /** pass is the password for user. */
  pass?: string;
  /** tls: true, or node:tls options; upgrades after INFO as NATS does. */
  tls?: boolean | TLSConnectionOptions;
  /** crc turns on end-to-end checksums in both directions (default true). */
  crc?: boolean;
  /** reconnect: false disables it; an object tunes it (default on). */
  reconnect?: boolean | ReconnectOptions;
  /**
   * timeoutMs bounds connecting and the handshake with each server, and how
   * long after its first not_leader answer a publish is resent (default 10000).
   */
  timeoutMs?: number;
  /** pingIntervalMs is how often an idle connection is probed (default INFO heartbeat_ms, else 30000). */
  pingIntervalMs?: number;
  /** signal aborts connecting. */
  signal?: AbortSignal;
}

/** ServerAddr is one parsed entry of servers. */
export interface ServerAddr {
  host: string;
  port: number;
  tls: boolean;
  /** url is the entry as given, for error messages. */
  url: string;
  /**
   * user and pass come from "user:pass@" in the URL, token from "token@"
   * (as in the Go and Python SDKs); the connect options' credentials win.
   */
  user?: string;
  pass?: string;
  token?: string;
}

/** Resolved is ConnectOptions after validation, with defaults applied. */
export interface Resolved {
  servers: ServerAddr[];
  discover: boolean;
  name: string | undefined;
  token: string | undefined;
  user: string | undefined;
  pass: string | undefined;
  tls: TLSConnectionOptions | undefined;
  crc: boolean;
  reconnect: Required<ReconnectOptions> | undefined;
  timeoutMs: number;
  pingIntervalMs: number | undefined;
}

/** parseServer parses one servers entry; throws InvalidArgumentError. */
export function parseServer(s: string): ServerAddr {
  const raw = s.includes('://') ? s : `nats://${s}`;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new InvalidArgumentError(`invalid server ${JSON.stringify(s)}`);
  }
  if (!['nats:', 'tls:', 'fibril:'].includes(u.protocol)) {
    throw new InvalidArgumentError(`server ${JSON.stringify(s)}: scheme must be nats, tls or fibril`);
  }
  const port = u.port === '' ? 4222 : Number(u.port);
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (host === '') throw new InvalidArgumentError(`server ${JSON.stringify(s)}: no host`);
  const addr: ServerAddr = { host, port, tls: u.protocol === 'tls:', url: s };
  const user = decodeURIComponent(u.username);
  if (u.password !== '') {
    addr.user = user;
    addr.pass = decodeURIComponent(u.password);
  } else if (user !== '') {
    addr.token = user;
  }
  return addr;
}

function positive(n: number | undefined, what: string, dflt: number, allowNeg1 = false): number {
  if (n === undefined) return dflt;
  if (!Number.isFinite(n) || (n < 0 && !(allowNeg1 && n === -1))) throw new InvalidArgumentError(`${what} must be a non-negative number`);
  return n;
}

/** resolve validates opts once and applies defaults; it never mutates opts. */
export function resolve(opts: ConnectOptions): Resolved {
  const list = opts.servers === undefined ? ['127.0.0.1:4222'] : Array.isArray(opts.servers) ? opts.servers : [opts.servers];
  if (list.length === 0) throw new InvalidArgumentError('servers is empty');
  const servers = list.map(parseServer);
  if (opts.discover !== undefined && typeof opts.discover !== 'boolean') throw new InvalidArgumentError('discover must be a boolean');
  if ((opts.user === undefined) !== (opts.pass === undefined)) throw new InvalidArgumentError('user and pass go together');
  let reconnect: Required<ReconnectOptions> | undefined;
  if (opts.reconnect !== false) {
    const r = typeof opts.reconnect === 'object' ? opts.reconnect : {};
    reconnect = {
      maxAttempts: positive(r.maxAttempts, 'reconnect.maxAttempts', -1, true),
      initialDelayMs: positive(r.initialDelayMs, 'reconnect.initialDelayMs', 100),
      maxDelayMs: positive(r.maxDelayMs, 'reconnect.maxDelayMs', 5000),
      jitter: positive(r.jitter, 'reconnect.jitter', 0.2),
    };
    if (reconnect.jitter > 1) throw new InvalidArgumentError('reconnect.jitter must be at most 1');
  }
  const tls = opts.tls === true ? {} : opts.tls === false || opts.tls === undefined ? undefined : { ...opts.tls };
  return {
    servers,
    discover: opts.discover ?? true,
    name: opts.name,
    token: opts.token,
    user: opts.user,
    pass: opts.pass,
    tls: tls ?? (servers.some((s) => s.tls) ? {} : undefined),
    crc: opts.crc ?? true,
    reconnect,
    timeoutMs: positive(opts.timeoutMs, 'timeoutMs', 10000),
    pingIntervalMs: opts.pingIntervalMs === undefined ? undefined : positive(opts.pingIntervalMs, 'pingIntervalMs', 30000),
  };
}

/** backoff returns the delay before each reconnect attempt of pass n (0-based) over the servers. */
export function backoff(r: Required<ReconnectOptions>, n: number, rand: () => number = Math.random): number {
  const base = Math.min(r.maxDelayMs, r.initialDelayMs * 2 ** Math.min(n, 30));
  const j = base * r.jitter * (rand() * 2 - 1);
  return Math.max(0, Math.round(base + j));
}
