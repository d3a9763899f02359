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

  /** settled says whether ack, nack or reject was already called. */
  get settled(): boolean {
    return this.#settled;
  }

  /** string decodes data as UTF-8. */
  string(): string {
    return dec.decode(this.data);
  }

  /** json parses data as JSON. */
  json<T = unknown>(): T {
    return JSON.parse(this.string()) as T;
  }

  /** ack settles the message as done. Acking twice is harmless (+OK). */
  ack(opts: SettleOptions = {}): Promise<void> {
    return this.#do('ACK', undefined, opts.signal, true);
  }

  /** nack hands the message back for redelivery after delay ms (default 0). */
  nack(opts: SettleOptions & { delay?: number } = {}): Promise<void> {
    return this.#do('NACK', opts.delay, opts.signal, true);
  }

  /** reject dead-letters the message at once (no more deliveries). */
  reject(opts: SettleOptions = {}): Promise<void> {
    return this.#do('REJECT', undefined, opts.signal, true);
  }

  /** inProgress extends the lease (by ms, or the group's lease time) while work goes on. */
  inProgress(opts: SettleOptions & { ms?: number } = {}): Promise<void> {
    return this.#do('EXTEND', opts.ms, opts.signal, false);
  }

  #do(op: 'ACK' | 'NACK' | 'REJECT' | 'EXTEND', arg: number | undefined, signal: AbortSignal | undefined, final: boolean): Promise<void> {
    if (this.handle === undefined || this.reply === undefined) return Promise.reject(new NotDurableError());
    if (final) this.#settled = true;
    return this.#settler.settle(op, this.reply, arg, signal);
  }
}
