// Msg: one delivery from a subscription or a fetch, with its settle verbs
// (SPEC.md "Deliveries" and "ACK/NACK/REJECT/EXTEND").
import { NotDurableError } from './errors.js';
import { type Handle, parseHandle } from './handle.js';
import { MsgHeaders } from './headers.js';

const dec = new TextDecoder();

/** Settler sends one settle command and resolves on the server's +OK. */
export interface Settler {
  /** settle sends ACK/NACK/REJECT/EXTEND for handle; arg is the delay or lease in ms. */
  settle(op: 'ACK' | 'NACK' | 'REJECT' | 'EXTEND', handle: string, arg: number | undefined, signal?: AbortSignal): Promise<void>;
  /** ackQueued queues an ACK of handle with the others of its burst (one ACK line). */
  ackQueued(handle: string): Promise<void>;
}

/** SettleOptions are accepted by every settle method. */
export interface SettleOptions {
  /** signal abandons waiting for the answer (the command may still apply). */
  signal?: AbortSignal;
}

/**
 * Msg is one delivered message. Its fields are owned by the caller (the
 * bytes are not reused by the SDK). Settle methods resolve once the server
 * answered +OK and reject with a FibrilError otherwise (e.g. StaleHandleError
 * when the lease expired and the message went to someone else).
 */
export class Msg {
  /** subject the message was published to. */
  readonly subject: string;
  /** sid of the subscription ("0" for fetch). */
  readonly sid: string;
  /** reply is the reply-to subject: the ack handle for durable deliveries. */
  readonly reply: string | undefined;
  /** data is the payload (headers excluded). */
  readonly data: Uint8Array;
  /** headers are the message's headers, or undefined when it had none. */
  readonly headers: MsgHeaders | undefined;
  /** crc is the checksum the server sent (already verified), if crc mode is on. */
  readonly crc: number | undefined;
  /** handle is the parsed ack handle, or undefined for plain messages. */
  readonly handle: Handle | undefined;
  #settler: Settler;
  #settling = false;
  #settled = false;

  /** Creates a message; the SDK does this, applications do not need to. */
  constructor(
    settler: Settler,
    f: { subject?: string; sid?: string; reply?: string; header?: Uint8Array; payload?: Uint8Array; crc?: number; hasCRC?: boolean },
  ) {
    this.#settler = settler;
    this.subject = f.subject ?? '';
    this.sid = f.sid ?? '';
    this.reply = f.reply;
    this.data = f.payload ?? new Uint8Array(0);
    this.headers = f.header !== undefined ? MsgHeaders.decode(f.header) : undefined;
    this.crc = f.hasCRC ? f.crc : undefined;
    this.handle = f.reply !== undefined ? parseHandle(f.reply) : undefined;
  }

  /** durable says whether the message carries an ack handle. */
  get durable(): boolean {
    return this.handle !== undefined;
  }

  /** deliveryCount is how many times this message was delivered (1 = first time; plain messages: 1). */
  get deliveryCount(): number {
    return this.handle?.attempt ?? 1;
  }

  /** partition is the message's partition (durable deliveries only). */
  get partition(): number | undefined {
    return this.handle?.partition;
  }

  /** seq is the message's sequence in its partition (durable deliveries only). */
  get seq(): bigint | undefined {
    return this.handle?.seq;
  }

  /**
   * settled says whether the server has answered an ack, nack or reject of
   * this message with +OK (it turns true only then; see settling).
   */
  get settled(): boolean {
    return this.#settled;
  }

  /** settling says whether ack, nack or reject was called (answered or not). */
  get settling(): boolean {
    return this.#settling;
  }

  /** string decodes data as UTF-8. */
  string(): string {
    return dec.decode(this.data);
  }

  /** json parses data as JSON. */
  json<T = unknown>(): T {
    return JSON.parse(this.string()) as T;
  }

  /**
   * ack settles the message as done. The fast path is not to await it: the
   * ACK is queued and written with the rest of the burst as one line, and a
   * consumer that does not wait never pays a round trip or the server's
   * commit per message (a failure is then dropped: the message comes
   * again). Await it when the ack must be durable before going on: it
   * resolves once the server committed it, and rejects with its typed error
   * (StaleHandleError when the lease expired first). Acking twice is
   * harmless (+OK). opts.signal abandons waiting; the ACK still goes out.
   */
  ack(opts: SettleOptions = {}): Promise<void> {
    if (this.handle === undefined || this.reply === undefined) return Promise.reject(new NotDurableError());
    this.#settling = true;
    const p = this.#settler.ackQueued(this.reply).then(() => {
      this.#settled = true;
    });
    p.catch(() => {}); // not awaiting an ack is the fast path: no unhandled rejection
    const signal = opts.signal;
    if (signal === undefined) return p;
    return new Promise<void>((res, rej) => {
      const why = () => rej(signal.reason ?? new DOMException('aborted', 'AbortError'));
      if (signal.aborted) return why();
      signal.addEventListener('abort', why, { once: true });
      p.then(res, rej).finally(() => signal.removeEventListener('abort', why));
    });
  }

  /**
   * nack hands the message back for redelivery after opts.delayMs (default
   * 0: at once); resolves on the server's +OK. opts.delay is the old name of
   * delayMs (deprecated).
   */
  nack(opts: SettleOptions & { delayMs?: number; delay?: number } = {}): Promise<void> {
    return this.#do('NACK', opts.delayMs ?? opts.delay, opts.signal, true);
  }

  /** reject dead-letters the message at once (no more deliveries). */
  reject(opts: SettleOptions = {}): Promise<void> {
    return this.#do('REJECT', undefined, opts.signal, true);
  }

  /**
   * inProgress extends the lease to opts.extendMs from now (default: the
   * group's lease) while work goes on. opts.ms is the old name of extendMs
   * (deprecated).
   */
  inProgress(opts: SettleOptions & { extendMs?: number; ms?: number } = {}): Promise<void> {
    return this.#do('EXTEND', opts.extendMs ?? opts.ms, opts.signal, false);
  }

  #do(op: 'ACK' | 'NACK' | 'REJECT' | 'EXTEND', arg: number | undefined, signal: AbortSignal | undefined, final: boolean): Promise<void> {
    if (this.handle === undefined || this.reply === undefined) return Promise.reject(new NotDurableError());
    if (!final) return this.#settler.settle(op, this.reply, arg, signal);
    this.#settling = true;
    return this.#settler.settle(op, this.reply, arg, signal).then(() => {
      this.#settled = true;
    });
  }
}
