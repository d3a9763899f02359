// Subscription: the async iterable behind consume() and subscribe().
// Deliveries are queued as they arrive; for a durable group the server
// bounds the queue at maxInFlight unsettled messages.
import type { FibrilError } from './error_base.js';
import { DeliveryCorruptError } from './errors.js';
import type { Msg } from './message.js';

/** RunOptions tune Subscription.run. */
export interface RunOptions {
  /** concurrency is how many handlers run at once (default 1). */
  concurrency?: number;
  /** nackDelayMs is the redelivery delay after a handler threw (default 0: at once). */
  nackDelayMs?: number;
  /**
   * onError receives what does not stop consuming: a handler's exception,
   * a failed ack or nack, a corrupt delivery (default: console.error).
   */
  onError?: (err: unknown) => void;
}

/** SubscriptionOwner is what a Subscription needs from its connection. */
export interface SubscriptionOwner {
  /** unsubscribe sends UNSUB for sid and forgets it; leftovers are handed back. */
  unsubscribe(sub: Subscription, leftovers: Msg[]): void;
}

/**
 * Subscription is an async iterable of messages. Breaking out of a
 * `for await` loop, calling close(), disposing it or aborting its signal
 * unsubscribes; durable messages still queued are nacked so they are
 * redelivered at once. The loop throws when the subscription fails (the
 * server refused the SUB, or the connection closed for good), and once per
 * corrupt delivery (DeliveryCorruptError; the SDK already nacked it, and the
 * subscription goes on).
 */
export class Subscription implements AsyncIterable<Msg>, AsyncDisposable {
  /** sid is the subscription id on the wire. */
  readonly sid: string;
  /** subject is the topic or subject subscribed to. */
  readonly subject: string;
  /** group is the durable consumer group or queue group, if any. */
  readonly group: string | undefined;
  /** maxInFlight is the credit asked for (durable groups only). */
  readonly maxInFlight: number | undefined;
  /** ready resolves once the server accepted the SUB, and rejects if it refused it. */
  readonly ready: Promise<void>;

  #owner: SubscriptionOwner;
  // Queued deliveries, and non-terminal errors in their place (a corrupt delivery).
  #queue: (Msg | { error: unknown })[] = [];
  #head = 0;
  #waiters: { res: (r: IteratorResult<Msg>) => void; rej: (e: unknown) => void }[] = [];
  #error: unknown;
  #done = false;
  #received = 0;
  #readyResolve!: () => void;
  #readyReject!: (e: unknown) => void;
  #readySettled = false;

  /** Creates a subscription; use Connection.consume or subscribe instead. */
  constructor(owner: SubscriptionOwner, sid: string, subject: string, group?: string, maxInFlight?: number, signal?: AbortSignal) {
    this.#owner = owner;
    this.sid = sid;
    this.subject = subject;
    this.group = group;
    this.maxInFlight = maxInFlight;
    this.ready = new Promise<void>((res, rej) => {
      this.#readyResolve = res;
      this.#readyReject = rej;
    });
    this.ready.catch(() => {}); // the error also surfaces through iteration
    if (signal !== undefined) {
      if (signal.aborted) queueMicrotask(() => this.close());
      else signal.addEventListener('abort', () => this.close(), { once: true });
    }
  }

  /** received counts messages delivered to this subscription so far. */
  get received(): number {
    return this.#received;
  }

  /** closed says whether the subscription has ended. */
  get closed(): boolean {
    return this.#done;
  }

  /** @internal accepted marks the SUB as accepted by the server. */
  accepted(): void {
    if (this.#readySettled) return;
    this.#readySettled = true;
    this.#readyResolve();
  }

  /** @internal push queues a delivery. */
  push(m: Msg): void {
    if (this.#done) return;
    this.#received++;
    this.#deliver(m);
  }

  /**
   * @internal pushError queues an error in the stream without ending it:
   * the next call of next() rejects with it, later calls go on.
   */
  pushError(err: unknown): void {
    if (this.#done) return;
    this.#deliver({ error: err });
  }

  #deliver(item: Msg | { error: unknown }): void {
    const w = this.#waiters.shift();
    if (w === undefined) {
      this.#queue.push(item);
      return;
    }
    if ('error' in item) w.rej(item.error);
    else w.res({ value: item, done: false });
  }

  /** @internal fail ends the subscription with err; queued messages are still handed out first. */
  fail(err: FibrilError | unknown): void {
    if (this.#done || this.#error !== undefined) return;
    if (!this.#readySettled) {
      this.#readySettled = true;
      this.#readyReject(err);
    }
    this.#error = err;
    for (const w of this.#waiters.splice(0)) w.rej(err);
  }

  /** @internal end finishes iteration without an error (connection closed cleanly). */
  end(): void {
    if (this.#done) return;
    this.accepted();
    this.#finish();
  }

  /** close unsubscribes; queued durable messages are nacked. Idempotent. */
  close(): void {
    if (this.#done) return;
    this.accepted();
    const left = this.#finish();
    this.#owner.unsubscribe(this, left);
  }

  #finish(): Msg[] {
    this.#done = true;
    const left = this.#queue.slice(this.#head).filter((x): x is Msg => !('error' in x));
    this.#queue = [];
    this.#head = 0;
    for (const w of this.#waiters.splice(0)) w.res({ value: undefined, done: true });
    return left;
  }

  /**
   * next returns the next message (the async iterator protocol). Several
   * callers may wait at once (one worker loop each); each message goes to
   * one of them, in call order. A corrupt delivery rejects one call with
   * DeliveryCorruptError and the stream goes on; a terminal error rejects
   * every call from then on.
   */
  next(): Promise<IteratorResult<Msg>> {
    if (this.#head < this.#queue.length) {
      const item = this.#queue[this.#head]!;
      this.#queue[this.#head++] = undefined as unknown as Msg;
      if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
        this.#queue = this.#queue.slice(this.#head);
        this.#head = 0;
      }
      if ('error' in item) return Promise.reject(item.error);
      return Promise.resolve({ value: item, done: false });
    }
    if (this.#error !== undefined) return Promise.reject(this.#error);
    if (this.#done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((res, rej) => this.#waiters.push({ res, rej }));
  }

  /**
   * run calls handler for every message until the subscription closes (the
   * handler-style consumer, Go's Consume). A message the handler did not
   * settle is acked when it returns (Msg.ack, not awaited: batched, no
   * round trip per message) and nacked (after nackDelayMs) when it throws.
   * To stop, close the subscription (or abort its signal): no new message
   * is handed out, buffered ones go back to the server at once, running
   * handlers finish, and run resolves once every ack was answered. It
   * rejects with the subscription's error if it ended with one.
   */
  async run(handler: (m: Msg) => unknown, opts: RunOptions = {}): Promise<void> {
    const concurrency = opts.concurrency ?? 1;
    if (!Number.isSafeInteger(concurrency) || concurrency < 1) throw new RangeError('run: concurrency must be a positive integer');
    const report = opts.onError ?? ((e: unknown) => console.error('fibril: consumer error:', e));
    const acks = new Set<Promise<void>>();
    const worker = async (): Promise<void> => {
      for (;;) {
        let r: IteratorResult<Msg>;
        try {
          r = await this.next();
        } catch (e) {
          if (e instanceof DeliveryCorruptError) {
            report(e); // already handed back
            continue;
          }
          throw e;
        }
        if (r.done) return;
        const m = r.value;
        try {
          await handler(m);
        } catch (e) {
          report(e);
          if (m.durable && !m.settling) await m.nack({ delayMs: opts.nackDelayMs }).catch(report);
          continue;
        }
        if (m.durable && !m.settling) {
          const p = m.ack().then(
            () => void acks.delete(p),
            (e: unknown) => {
              acks.delete(p);
              report(e);
            },
          );
          acks.add(p);
        }
      }
    };
    try {
      await Promise.all(Array.from({ length: concurrency }, worker));
    } finally {
      this.close();
      await Promise.allSettled([...acks]);
    }
  }

  /**
   * Returns an iterator over this subscription. Leaving a `for await` loop
   * early (break, return) closes the subscription; an error thrown by next()
   * does not, so a loop may catch a DeliveryCorruptError and iterate again.
   */
  [Symbol.asyncIterator](): AsyncIterator<Msg> {
    return {
      next: () => this.next(),
      return: async () => {
        this.close();
        return { value: undefined, done: true };
      },
    };
  }

  /** Unsubscribes (await using). */
  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
  }
}
