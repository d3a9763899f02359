// ServerList: the servers one connection may use, and the order it tries
// them in (SPEC.md 11.1 "Several servers and failover"). connect tries the
// given servers in order; each INFO's connect_urls ("host:port") are added
// to the end, once each, up to MAX_SERVERS in all, taking the scheme, TLS
// and credentials of the server that sent them; after a lost link the
// reconnect tries the next server, wrapping around, and its backoff grows
// once per full pass over the list.
//
// Owns the list and the current position. Never opens sockets or sleeps:
// the connection does, asking attempt(n) which server and which pass.
import type { ServerAddr } from './options.js';

/** MAX_SERVERS bounds the list, the given servers and the discovered ones together (SPEC.md 11.1). */
export const MAX_SERVERS = 64;

/** Attempt is one reconnect attempt: the server to try and the pass over the list it belongs to. */
export interface Attempt {
  addr: ServerAddr;
  /** pass counts full passes over the list before this attempt (0 in the first); the backoff grows with it. */
  pass: number;
}

function key(host: string, port: number): string {
  return `${host.toLowerCase()}:${port}`;
}

/** addrName names a server in messages: "host:port" ("[v6]:port"), never its credentials. */
export function addrName(a: ServerAddr): string {
  return `${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`;
}

/** ServerList is the ordered list of servers of one connection. */
export class ServerList {
  #list: ServerAddr[] = [];
  #keys = new Set<string>();
  #current = 0;
  #discover: boolean;

  /**
   * Creates the list from the given servers (in order, repeats dropped, all
   * kept even past MAX_SERVERS); discover allows learn.
   */
  constructor(given: readonly ServerAddr[], discover: boolean) {
    this.#discover = discover;
    for (const a of given) this.#add(a);
  }

  /** all is the list, given servers first, then the discovered ones in the order learnt. */
  get all(): readonly ServerAddr[] {
    return this.#list;
  }

  /** current is the server of the current (or last) link. */
  get current(): ServerAddr {
    return this.#list[this.#current]!;
  }

  /** use records that a link to addr (an entry of all) is up; reconnects start after it. */
  use(addr: ServerAddr): void {
    const i = this.#list.indexOf(addr);
    if (i >= 0) this.#current = i;
  }

  /**
   * learn adds INFO's connect_urls (taken as sent: anything but an array of
   * "host:port" strings is ignored, entry by entry) after the known servers,
   * each with via's TLS and credentials. Returns how many were added: none
   * when discovery is off or the list holds MAX_SERVERS.
   */
  learn(connectURLs: unknown, via: ServerAddr): number {
    if (!this.#discover || !Array.isArray(connectURLs)) return 0;
    let added = 0;
    for (const u of connectURLs) {
      if (this.#list.length >= MAX_SERVERS) break;
      const a = discovered(u, via);
      if (a !== undefined && this.#add(a)) added++;
    }
    return added;
  }

  /**
   * attempt returns reconnect attempt n (0-based) after losing the current
   * server: the servers after it in list order, wrapping around, so the
   * current one comes last in each pass.
   */
  attempt(n: number): Attempt {
    const len = this.#list.length;
    return { addr: this.#list[(this.#current + 1 + n) % len]!, pass: Math.floor(n / len) };
  }

  #add(a: ServerAddr): boolean {
    const k = key(a.host, a.port);
    if (this.#keys.has(k)) return false;
    this.#keys.add(k);
    this.#list.push(a);
    return true;
  }
}

// discovered parses one connect_urls entry, "host:port" or "[v6]:port";
// undefined if it is anything else (a URL, credentials, a path, no port).
function discovered(u: unknown, via: ServerAddr): ServerAddr | undefined {
  if (typeof u !== 'string') return undefined;
  const m = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$/.exec(u);
  if (m === null) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return undefined;
  const host = m[1]!.replace(/^\[|\]$/g, '');
  const a: ServerAddr = { host, port, tls: via.tls, url: `${via.tls ? 'tls' : 'nats'}://${u}` };
  if (via.user !== undefined) a.user = via.user;
  if (via.pass !== undefined) a.pass = via.pass;
  if (via.token !== undefined) a.token = via.token;
  return a;
}
