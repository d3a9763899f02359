// Connection: the client. In fibril mode every command gets exactly one
// answer, in order (SPEC.md "Strict answers"), so the connection keeps a FIFO
// of outstanding requests; MSG/HMSG for subscriptions, server PINGs, fatal
// -ERRs and INFO updates are the only unsolicited frames.
//
// Failover (SPEC.md 11.1; the server list and its order are servers.ts's):
// a publish resolves only on its confirm. Publishes still unconfirmed when
// the link drops are written again, in their order, first thing on the next
// link (to whichever server answers), then the subscriptions, then the
// commands made while reconnecting; so a confirmed publish is never lost
// (unconfirmed ones may be stored twice; give them a msgId to let the
// server de-duplicate). Other commands outstanding at the drop reject with
// DisconnectedError (their fate is unknown). A publish answered not_leader
// is parked and written again on the same link after a backoff, keeping its
// place in the publish window, until timeoutMs after its first not_leader.
import { encodeAck, encodeExtend, encodeNack, encodePing, encodePoll, encodePublish, encodeReject, encodeSub, encodeUnsub } from './encoder.js';
import {
  ConnectionClosedError,
  DeliveryCorruptError,
  DisconnectedError,
  ErrorCodes,
  errorFromWire,
  FibrilError,
  InvalidArgumentError,
  NoServersError,
} from './errors.js';
import { parseHandle } from './handle.js';
import { Link, openLink, type ServerInfo } from './link.js';
import { Fifo } from './fifo.js';
import { AckQueue, ackLines } from './acks.js';
import { Groups, Topics } from './manage.js';
import { Msg } from './message.js';
import { backoff, type ConnectOptions, resolve, type Resolved } from './options.js';
import type { Command, ParseFailure } from './parser.js';
import { addrName, ServerList } from './servers.js';
import { Subscription } from './subscription.js';
import { type ConsumeOptions, type FetchOptions, parsePosition, type Position, type PublishOptions } from './types.js';

export { parsePosition } from './types.js';
export type { ConsumeOptions, FetchOptions, Position, PublishOptions } from './types.js';

/** Answer is a frame that answers a request. */
type Answer = { op: '+OK' | '-ERR' | 'PONG'; text?: string };

/** Req is one outstanding command. */
interface Req {
  kind: 'pub' | 'sub' | 'poll' | 'other';
  bytes: Buffer;
  /** seq orders publishes by call, for the resend after a lost link. */
  seq?: number;
  /** gone says the caller stopped waiting (a parked publish is then dropped). */
  gone?(): boolean;
  /** notLeader is the resend schedule of a publish answered not_leader. */
  notLeader?: { deadline: number; delayMs: number; timer?: NodeJS.Timeout };
  answer(a: Answer): void;
  fail(e: unknown): void;
  msg?(c: Command): void;
  corrupt?(e: DeliveryCorruptError, c: Command): void;
}


type State = 'connected' | 'reconnecting' | 'closing' | 'closed';

// The resend backoff of a publish answered not_leader (SPEC.md 11.1 point 5).
const NOT_LEADER_FIRST_MS = 50;
const NOT_LEADER_MAX_MS = 1000;

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('aborted', 'AbortError');
}

/**
 * connect tries opts.servers in order, each once (up to timeoutMs each), and
 * completes the handshake with the first that answers. It rejects with
 * InvalidArgumentError for bad options, a server's non-retriable fatal error
 * at once (e.g. authorization, NotFibrilError), signal's reason, or
 * NoServersError naming every address tried and why it failed (cause: the
 * last failure).
 */
export async function connect(opts: ConnectOptions = {}): Promise<Connection> {
  const o = resolve(opts);
  const servers = new ServerList(o.servers, o.discover);
  const tried: string[] = [];
  let last: unknown;
  for (const addr of servers.all) {
    try {
      const link = await openLink(addr, o, opts.signal);
      return new Connection(o, servers, link);
    } catch (e) {
      if (opts.signal?.aborted) throw e;
      if (e instanceof FibrilError && e.fatal && !e.retriable) throw e;
      tried.push(`${addrName(addr)} (${asError(e).message})`);
      last = e;
    }
  }
  throw new NoServersError(`could not connect to any server: ${tried.join(', ')}`, { cause: last });
}

/**
 * Connection is a client connection. Create it with connect(). When
 * reconnect is on it survives lost links, moving to the next server of its
 * list (SPEC.md 11.1: see servers, publish); closed() resolves once it is
 * closed for good.
 */
export class Connection implements AsyncDisposable {
  /** topics manages durable topics. */
  readonly topics: Topics;
  /** groups manages consumer groups. */
  readonly groups: Groups;

  #o: Resolved;
  #servers: ServerList;
  #link: Link | undefined;
  #state: State = 'connected';
  #pending = new Fifo<Req>();
  // Publishes unconfirmed at a link loss, by seq: the next link's first commands.
  #resend: Req[] = [];
  // Commands made while reconnecting, in call order.
  #backlog: Req[] = [];
  // Publishes answered not_leader, waiting for their resend timer.
  #parked = new Set<Req>();
  #pubSeq = 0;
  #pubCount = 0;
  #pubWaiters = new Fifo<{ go: () => void; stop: (e: unknown) => void; cancelled: boolean }>();
  #subs = new Map<string, Subscription>();
  #nextSid = 1;
  // Acks of a burst, written as one line before the next command (acks.ts).
  // A queued ack finds no link while reconnecting: the old link's leases
  // are released, so those messages come again; it fails at once.
  #acks = new AckQueue(
    (line) => (this.#state === 'connected' ? this.#request(Buffer.from(line)) : Promise.reject(new DisconnectedError('not connected: the delivery will come again'))),
    () => (typeof this.#info.max_control_line === 'number' ? this.#info.max_control_line : 4096),
  );
  #closedPromise: Promise<Error | undefined>;
  #closedResolve!: (e: Error | undefined) => void;
  #pinger: NodeJS.Timeout | undefined;
  #reconnects = 0;
  #info: ServerInfo;
  // Until when a long POLL may hold back every answer (SPEC.md 4): the
  // pinger does not call such a quiet link stale before three intervals
  // past it (the answer to a POLL that waited is late on a busy machine).
  #quietUntil = 0;

  /** @internal Use connect(). */
  constructor(o: Resolved, servers: ServerList, link: Link) {
    this.#o = o;
    this.#servers = servers;
    this.#info = link.info;
    this.topics = new Topics((b, s) => this.#request(b, s));
    this.groups = new Groups((b, s) => this.#request(b, s));
    this.#closedPromise = new Promise((r) => (this.#closedResolve = r));
    this.#adopt(link);
  }

  /** info is the INFO of the server currently (or last) connected to. */
  get info(): ServerInfo {
    return this.#info;
  }

  /**
   * servers lists the servers this connection may use, in the order it tries
   * them: those given, then those learnt from connect_urls (discover).
   */
  get servers(): string[] {
    return this.#servers.all.map((a) => a.url);
  }

  /** reconnects counts successful reconnections. */
  get reconnects(): number {
    return this.#reconnects;
  }

  /** isClosed says whether the connection is closed for good. */
  get isClosed(): boolean {
    return this.#state === 'closed';
  }

  /** isConnected says whether a link is up right now. */
  get isConnected(): boolean {
    return this.#state === 'connected';
  }

  /** unconfirmed is the number of publishes sent or queued but not yet confirmed. */
  get unconfirmed(): number {
    return this.#pubCount;
  }

  /** maxUnconfirmed is the publish window (INFO max_unconfirmed, default 256). */
  get maxUnconfirmed(): number {
    const m = this.#info.max_unconfirmed;
    return typeof m === 'number' && m > 0 ? m : 256;
  }

  /**
   * closed resolves when the connection is closed for good: with undefined
   * after close(), or with the error that ended it.
   */
  closed(): Promise<Error | undefined> {
    return this.#closedPromise;
  }

  // ---- publishing ----

  /**
   * publish sends a message and resolves with its Position once the server
   * confirmed it durable, or null when no durable topic captured it. At most
   * maxUnconfirmed publishes are outstanding; further calls wait their turn
   * (in call order). A publish unconfirmed when the link drops is sent
   * again on the next link, to whichever server answers (SPEC.md 11.1): it
   * may be stored twice unless it has a msgId. One answered not_leader (an
   * election is under way) is sent again on the same link after 50 ms,
   * doubling up to 1 s, holding its place in the window, until confirmed or
   * refused otherwise; timeoutMs after its first not_leader it rejects with
   * NotLeaderError (retriable). Rejects with the server's typed error (e.g.
   * a full topic), InvalidArgumentError, ConnectionClosedError, or signal's
   * reason.
   */
  publish(subject: string, data?: Uint8Array | string, opts: PublishOptions = {}): Promise<Position | null> {
    let bytes: Buffer;
    try {
      if (this.#state === 'closing' || this.#state === 'closed') throw new ConnectionClosedError();
      bytes = encodePublish(subject, data, opts, this.#info.max_payload, this.#o.crc);
    } catch (e) {
      return Promise.reject(e);
    }
    const signal = opts.signal;
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise<Position | null>((res, rej) => {
      let done = false;
      const onAbort = () => {
        if (done) return;
        done = true;
        rej(abortReason(signal!));
      };
      // finish ends the publish: its window slot is given back exactly once,
      // whether or not the caller still waits.
      const finish = (f: () => void) => {
        this.#pubRelease();
        signal?.removeEventListener('abort', onAbort);
        if (done) return;
        done = true;
        f();
      };
      const req: Req = {
        kind: 'pub',
        bytes,
        seq: ++this.#pubSeq,
        gone: () => done,
        answer: (a) => {
          if (a.op === '+OK') {
            const pos = parsePosition(a.text ?? '');
            finish(() => (pos === undefined ? rej(new FibrilError('client_protocol_violation', `bad publish confirm ${JSON.stringify(a.text)}`)) : res(pos)));
          } else if (a.op === '-ERR') {
            const err = errorFromWire(a.text ?? '');
            if (err.code === ErrorCodes.NotLeader && !done && this.#parkNotLeader(req)) return;
            finish(() => rej(err));
          } else {
            finish(() => rej(new FibrilError('client_protocol_violation', 'PONG where a publish confirm was expected')));
          }
        },
        fail: (e) => finish(() => rej(e)),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const send = () => {
        if (done) req.fail(undefined); // gives the slot back
        else this.#enqueue(req);
      };
      if (this.#pubWaiters.length === 0 && this.#pubCount < this.maxUnconfirmed) {
        this.#pubCount++;
        send();
      } else {
        const w = {
          cancelled: false,
          go: send,
          stop: (e: unknown) => {
            signal?.removeEventListener('abort', onAbort);
            if (!done) {
              done = true;
              rej(e);
            }
          },
        };
        this.#pubWaiters.push(w);
        signal?.addEventListener(
          'abort',
          () => {
            w.cancelled = true; // skipped when its turn comes
          },
          { once: true },
        );
      }
    });
  }

  // #parkNotLeader holds a publish answered not_leader and writes it again
  // on this link once its backoff passed (SPEC.md 11.1 point 5). It keeps
  // its window slot meanwhile, so the window bounds parked publishes too.
  // False (the caller rejects with not_leader) once timeoutMs passed since
  // the first not_leader, or when the link is going away.
  #parkNotLeader(req: Req): boolean {
    if (this.#state !== 'connected') return false;
    const now = Date.now();
    const nl = (req.notLeader ??= { deadline: now + this.#o.timeoutMs, delayMs: NOT_LEADER_FIRST_MS });
    if (now >= nl.deadline) return false;
    const wait = Math.min(nl.delayMs, nl.deadline - now);
    nl.delayMs = Math.min(2 * nl.delayMs, NOT_LEADER_MAX_MS);
    this.#parked.add(req);
    nl.timer = setTimeout(() => {
      this.#parked.delete(req);
      if (req.gone?.()) req.fail(undefined);
      else this.#enqueue(req);
    }, wait);
    return true;
  }

  #pubRelease(): void {
    this.#pubCount--;
    while (this.#pubWaiters.length > 0 && this.#pubCount < this.maxUnconfirmed) {
      const w = this.#pubWaiters.shift()!;
      if (w.cancelled) continue;
      this.#pubCount++;
      w.go();
    }
  }

  // ---- consuming ----

  /**
   * consume starts a push consumer of a durable group (or a plain queue
   * group when no durable topic has that name) and returns it as an async
   * iterable. The SUB is sent at once; `sub.ready` resolves when the server
   * accepted it. Iteration throws the server's error if the SUB is refused,
   * DeliveryCorruptError once per corrupt delivery (after nacking it; the
   * subscription goes on), and ConnectionClosedError if the connection ends
   * with an error.
   */
  consume(topic: string, group: string, opts: ConsumeOptions = {}): Subscription {
    return this.#subscribe(topic, group, opts.maxInFlight, opts.signal);
  }

  /**
   * subscribe starts a plain NATS subscription (at-most-once fan-out, or a
   * queue group when opts.queue is set). Same iteration rules as consume.
   */
  subscribe(subject: string, opts: { queue?: string; signal?: AbortSignal } = {}): Subscription {
    return this.#subscribe(subject, opts.queue, undefined, opts.signal);
  }

  #subscribe(subject: string, group: string | undefined, maxInFlight: number | undefined, signal?: AbortSignal): Subscription {
    const sid = String(this.#nextSid++);
    const bytes = encodeSub(subject, sid, group, maxInFlight); // throws InvalidArgumentError
    const sub = new Subscription(this, sid, subject, group, maxInFlight, signal);
    if (this.#state === 'closing' || this.#state === 'closed') {
      sub.fail(new ConnectionClosedError());
      return sub;
    }
    this.#subs.set(sid, sub);
    this.#sendSub(sub, bytes);
    return sub;
  }

  #sendSub(sub: Subscription, bytes: Buffer): void {
    this.#enqueue({
      kind: 'sub',
      bytes,
      answer: (a) => {
        if (a.op === '+OK') sub.accepted();
        else {
          this.#subs.delete(sub.sid);
          sub.fail(a.op === '-ERR' ? errorFromWire(a.text ?? '') : new FibrilError('client_protocol_violation', 'unexpected answer to SUB'));
        }
      },
      fail: () => {
        // Link lost before the answer: the SUB is sent again on reconnect.
      },
    });
  }

  /** @internal unsubscribe is called by Subscription.close. */
  unsubscribe(sub: Subscription, leftovers: Msg[]): void {
    if (!this.#subs.delete(sub.sid)) return;
    if (this.#state !== 'connected') return;
    this.#enqueue(this.#fireAndForget(encodeUnsub(sub.sid)));
    for (const m of leftovers) if (m.durable && !m.settling) m.nack().catch(() => {});
  }

  #fireAndForget(bytes: Buffer): Req {
    return { kind: 'other', bytes, answer: () => {}, fail: () => {} };
  }

  /**
   * fetch pulls up to opts.max ready messages from a durable group, waiting
   * up to opts.wait ms for the first one; resolves with what arrived (maybe
   * none). While it waits, answers to later commands on this connection wait
   * too (SPEC.md). Rejects with the server's typed error,
   * DeliveryCorruptError (the batch is nacked), or signal's reason.
   */
  fetch(topic: string, group: string, opts: FetchOptions = {}): Promise<Msg[]> {
    const max = opts.max ?? 1;
    if (!Number.isSafeInteger(max) || max < 1) return Promise.reject(new InvalidArgumentError('fetch: max must be a positive integer'));
    let bytes: Buffer;
    try {
      bytes = encodePoll(topic, group, max, opts.waitMs ?? opts.wait);
    } catch (e) {
      return Promise.reject(e);
    }
    const signal = opts.signal;
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise<Msg[]>((res, rej) => {
      const msgs: Msg[] = [];
      let corrupt: DeliveryCorruptError | undefined;
      let done = false;
      const onAbort = () => {
        if (done) return;
        done = true;
        rej(abortReason(signal!));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#quietUntil = Math.max(this.#quietUntil, Date.now() + (opts.waitMs ?? opts.wait ?? 0));
      this.#enqueue({
        kind: 'poll',
        bytes,
        msg: (c) => {
          msgs.push(new Msg(this, c));
        },
        corrupt: (e, c) => {
          if (c.reply !== undefined) msgs.push(new Msg(this, c));
          corrupt ??= e;
        },
        answer: (a) => {
          signal?.removeEventListener('abort', onAbort);
          const giveBack = () => {
            for (const m of msgs) if (m.durable) m.nack().catch(() => {});
          };
          if (done) return giveBack();
          done = true;
          if (a.op === '-ERR') return rej(errorFromWire(a.text ?? ''));
          if (corrupt !== undefined) {
            giveBack();
            return rej(corrupt);
          }
          res(msgs);
        },
        fail: (e) => {
          signal?.removeEventListener('abort', onAbort);
          if (done) return;
          done = true;
          rej(e);
        },
      });
    });
  }

  /** @internal ackQueued implements Msg.ack: queued, one ACK line per burst (acks.ts). */
  ackQueued(handle: string): Promise<void> {
    return this.#acks.add(handle);
  }

  /** @internal settle implements Msg.nack/reject/inProgress. */
  settle(op: 'ACK' | 'NACK' | 'REJECT' | 'EXTEND', handle: string, arg: number | undefined, signal?: AbortSignal): Promise<void> {
    let bytes: Buffer;
    try {
      bytes =
        op === 'ACK' ? encodeAck([handle]) : op === 'NACK' ? encodeNack(handle, arg) : op === 'REJECT' ? encodeReject(handle) : encodeExtend(handle, arg);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#request(bytes, signal).then(() => undefined);
  }

  /**
   * ackAll acknowledges many messages with as few ACK lines as the server's
   * control-line limit allows. Resolves when every line got +OK; rejects
   * with the server's typed error if any handle was refused (the others are
   * settled regardless, SPEC.md 8.2).
   */
  async ackAll(msgs: Msg[], opts: { signal?: AbortSignal } = {}): Promise<void> {
    const handles = msgs.filter((m) => m.durable).map((m) => m.reply!);
    const lines = ackLines(handles, (typeof this.#info.max_control_line === 'number' ? this.#info.max_control_line : 4096) - 8);
    const results = await Promise.allSettled(lines.map((l) => this.#request(encodeAck(l), opts.signal)));
    const bad = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (bad !== undefined) throw bad.reason;
  }

  /** flush resolves once the server answered everything sent before it (a PING round trip). */
  async flush(opts: { signal?: AbortSignal } = {}): Promise<void> {
    await this.#request(encodePing(), opts.signal);
  }

  /**
   * #request sends one command and resolves with the argument of its +OK
   * (or "" for PONG); rejects with the server's typed error, a
   * DisconnectedError if the link drops first, or signal's reason.
   */
  #request(bytes: Buffer, signal?: AbortSignal): Promise<string> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise<string>((res, rej) => {
      let done = false;
      const finish = (f: () => void) => {
        if (done) return;
        done = true;
        signal?.removeEventListener('abort', onAbort);
        f();
      };
      const onAbort = () => finish(() => rej(abortReason(signal!)));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#enqueue({
        kind: 'other',
        bytes,
        answer: (a) => finish(() => (a.op === '-ERR' ? rej(errorFromWire(a.text ?? '')) : res(a.text ?? ''))),
        fail: (e) => finish(() => rej(e)),
      });
    });
  }

  // ---- link management ----

  #enqueue(req: Req): void {
    switch (this.#state) {
      case 'connected':
        if (this.#acks.pending) this.#acks.flush(); // acks queued earlier go first
        this.#pending.push(req);
        this.#link!.write(req.bytes);
        return;
      case 'reconnecting':
        // Not sent yet, so safe to send on the next link (SUBs are re-sent
        // from #subs instead).
        if (req.kind !== 'sub') this.#backlog.push(req);
        return;
      default:
        req.fail(new ConnectionClosedError());
    }
  }

  #adopt(link: Link): void {
    this.#link = link;
    this.#info = link.info;
    this.#state = 'connected';
    this.#pending = new Fifo<Req>();
    this.#servers.use(link.addr);
    this.#servers.learn(link.info.connect_urls, link.addr);
    link.onParseError = (e) => this.#onParseError(link, e);
    link.takeOver(
      (c) => this.#onCommand(link, c),
      (err) => this.#onLinkClosed(link, err),
    );
    if (link.closed) return;
    // SPEC.md 11.1 point 4: the publishes unconfirmed at the loss first, in
    // their order; then the subscriptions; then what was asked meanwhile.
    const resend = this.#resend;
    this.#resend = [];
    for (const r of resend) this.#enqueue(r);
    for (const sub of this.#subs.values()) {
      this.#sendSub(sub, encodeSub(sub.subject, sub.sid, sub.group, sub.maxInFlight));
    }
    const backlog = this.#backlog;
    this.#backlog = [];
    for (const r of backlog) this.#enqueue(r);
    this.#startPinger(link);
  }

  #startPinger(link: Link): void {
    clearInterval(this.#pinger);
    const hb = this.#info.heartbeat_ms;
    const every = this.#o.pingIntervalMs ?? (typeof hb === 'number' && hb > 0 ? hb : 30000);
    if (every <= 0) return;
    this.#pinger = setInterval(() => {
      if (link !== this.#link) return;
      const idle = Date.now() - link.lastRx;
      if (idle > 3 * every && Date.now() > this.#quietUntil + 3 * every) {
        link.destroy(new DisconnectedError('stale connection: server silent'));
      } else if (idle >= every) {
        this.#enqueue(this.#fireAndForget(encodePing()));
      }
    }, every);
    this.#pinger.unref();
  }

  #onCommand(link: Link, c: Command): void {
    if (link !== this.#link) return;
    switch (c.op) {
      case 'MSG':
      case 'HMSG':
        this.#onMsg(link, c);
        return;
      case 'INFO':
        this.#info = link.info;
        this.#servers.learn(link.info.connect_urls, link.addr);
        return;
      case '-ERR': {
        const err = errorFromWire(c.text ?? '');
        if (err.fatal) {
          // Not an answer: the server closes the link after it.
          link.fatal = err;
          return;
        }
        this.#answer(link, { op: '-ERR', text: c.text });
        return;
      }
      case '+OK':
      case 'PONG':
        this.#answer(link, { op: c.op, text: c.text });
        return;
      default:
        link.destroy(new FibrilError('client_protocol_violation', `unexpected ${c.op} from server`, { retriable: true }));
    }
  }

  #answer(link: Link, a: Answer): void {
    const req = this.#pending.shift();
    if (req === undefined) {
      link.destroy(new FibrilError('client_protocol_violation', `unsolicited ${a.op} from server`, { retriable: true }));
      return;
    }
    req.answer(a);
  }

  #onMsg(link: Link, c: Command): void {
    if (c.sid === '0') {
      const head = this.#pending.peek();
      if (head === undefined || head.msg === undefined) {
        link.destroy(new FibrilError('client_protocol_violation', 'delivery with sid 0 but no POLL outstanding', { retriable: true }));
        return;
      }
      head.msg(c);
      return;
    }
    const sub = this.#subs.get(c.sid!);
    const m = new Msg(this, c);
    if (sub === undefined) {
      // Late delivery after UNSUB: hand it back at once.
      if (m.durable) m.nack().catch(() => {});
      return;
    }
    sub.push(m);
  }

  // A delivery that fails its checks (checksum, header block) was skipped by
  // the parser. Durable ones are nacked so they come again; the consumer (or
  // fetch) sees DeliveryCorruptError. Other parse errors mean the server
  // broke the contract: drop the link.
  #onParseError(link: Link, e: ParseFailure): void {
    if (link !== this.#link) return;
    const c = e.command;
    if (c === undefined || (c.op !== 'MSG' && c.op !== 'HMSG')) {
      link.destroy(new FibrilError('client_protocol_violation', `server sent an invalid frame: ${e.message}`, { cause: e, retriable: true }));
      return;
    }
    const bad = new DeliveryCorruptError(`delivery on ${c.subject} is corrupt: ${e.message}`, c.reply ?? '', { cause: e });
    if (c.sid === '0') {
      const head = this.#pending.peek();
      if (head?.corrupt !== undefined) head.corrupt(bad, { ...c, header: undefined, op: 'MSG' });
      return;
    }
    if (c.reply !== undefined && parseHandle(c.reply) !== undefined) this.settle('NACK', c.reply, undefined).catch(() => {});
    this.#subs.get(c.sid!)?.pushError(bad);
  }

  #onLinkClosed(link: Link, err: unknown): void {
    if (link !== this.#link) return;
    this.#link = undefined;
    clearInterval(this.#pinger);
    const pending = this.#pending.drain();
    const parked = [...this.#parked];
    this.#parked.clear();
    for (const r of parked) clearTimeout(r.notLeader!.timer);
    const fatal = err instanceof FibrilError && err.fatal ? err : undefined;
    const giveUp = this.#state === 'closing' || this.#o.reconnect === undefined || (fatal !== undefined && !fatal.retriable);
    const lost = fatal ?? new DisconnectedError('connection lost', { cause: err });
    if (giveUp) {
      for (const r of [...pending, ...parked]) r.fail(this.#state === 'closing' ? new ConnectionClosedError() : lost);
      this.#finalize(this.#state === 'closing' ? undefined : asError(err ?? lost));
      return;
    }
    this.#state = 'reconnecting';
    // Sent and unanswered (each may have been stored) or parked (refused
    // for now): sent again, in call order, before anything else (SPEC.md 11.1).
    const resend = [...this.#resend];
    for (const r of parked) {
      if (r.gone?.()) r.fail(undefined); // abandoned while parked: not sent again
      else resend.push(r);
    }
    for (const r of pending) {
      if (r.kind === 'pub') resend.push(r);
      else r.fail(lost);
    }
    this.#resend = resend.sort((a, b) => a.seq! - b.seq!);
    void this.#reconnectLoop();
  }

  // #reconnectLoop tries the servers after the lost one, wrapping around;
  // the backoff before each attempt grows once per full pass over the list.
  async #reconnectLoop(): Promise<void> {
    const r = this.#o.reconnect!;
    const tried = new Map<string, string>(); // each address's latest failure, for the error
    let last: unknown;
    let attempts = 0;
    for (let n = 0; r.maxAttempts < 0 || n < r.maxAttempts; n++) {
      const { addr, pass } = this.#servers.attempt(n);
      await new Promise((res) => setTimeout(res, backoff(r, pass)));
      if (this.#state !== 'reconnecting') return;
      try {
        const link = await openLink(addr, this.#o);
        if (this.#state !== 'reconnecting') {
          link.socket.destroy();
          return;
        }
        this.#reconnects++;
        this.#adopt(link);
        return;
      } catch (e) {
        last = e;
        attempts++;
        tried.set(addrName(addr), asError(e).message);
        if (e instanceof FibrilError && e.fatal && !e.retriable) break;
      }
    }
    if (this.#state === 'reconnecting') {
      const why = [...tried].map(([a, e]) => `${a} (${e})`).join(', ');
      this.#finalize(new NoServersError(`reconnect failed after ${attempts} attempts: ${why}`, { cause: last }));
    }
  }

  #finalize(err: Error | undefined): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    clearInterval(this.#pinger);
    const closedErr = new ConnectionClosedError('connection closed', { cause: err });
    for (const r of this.#parked) clearTimeout(r.notLeader!.timer);
    for (const r of [...this.#resend, ...this.#parked, ...this.#backlog]) r.fail(closedErr);
    this.#resend = [];
    this.#parked.clear();
    this.#backlog = [];
    for (const w of this.#pubWaiters.drain()) w.stop(closedErr);
    for (const sub of this.#subs.values()) {
      if (err === undefined) sub.end();
      else sub.fail(closedErr);
    }
    this.#subs.clear();
    this.#closedResolve(err);
  }

  /**
   * close waits until the server answered everything already sent
   * (unconfirmed publishes included, up to timeoutMs), ends every
   * subscription and closes the connection. Publishes still waiting for a
   * link are rejected. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#state === 'closed' || this.#state === 'closing') {
      await this.#closedPromise;
      return;
    }
    if (this.#state === 'connected') {
      try {
        await this.#withTimeout(this.flush(), this.#o.timeoutMs);
      } catch {
        // Closing anyway.
      }
    }
    // The state may have changed while flushing.
    const link = this.#link;
    if (this.#state === 'connected' && link !== undefined) {
      this.#state = 'closing';
      for (const sub of this.#subs.values()) sub.end();
      link.end();
      setTimeout(() => link.destroy(), 1000).unref();
    } else if (this.#state === 'reconnecting') {
      this.#finalize(undefined);
    }
    await this.#closedPromise;
  }

  #withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
    return new Promise<T>((res, rej) => {
      const t = setTimeout(() => rej(new Error('timeout')), ms);
      p.then(
        (v) => {
          clearTimeout(t);
          res(v);
        },
        (e) => {
          clearTimeout(t);
          rej(e);
        },
      );
    });
  }

  /** Closes the connection (await using). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
