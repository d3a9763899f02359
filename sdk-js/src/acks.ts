// Coalesced acknowledgements (the twin of the Go SDK's AckAsync and the
// Python SDK's ack_async). Msg.ack does not write its own ACK line: it
// queues the handle here, and the queue is written as one ACK line (or as
// few as fit the server's max_control_line) once the current burst of
// callbacks is over (setImmediate), or before any other command the
// connection writes, whichever comes first; so commands keep the order they
// were issued in, and a consumer acking message by message sends one command
// per burst instead of waiting a round trip and a commit per message. Each
// promise still gets its own outcome: when a shared line is refused, its
// handles are acked again one by one (an ACK of a settled delivery is +OK).
//
// Owns the queue and the promises' outcomes. Never writes to the socket
// itself (the connection does, in command order) and never retries an ACK
// after a lost link (the server released those leases: the messages come
// again).
import { FibrilError } from './error_base.js';
import { ConnectionClosedError, DisconnectedError } from './errors.js';

/** AckSender writes one ACK line and resolves on +OK, rejecting with the server's error. */
export type AckSender = (line: string) => Promise<unknown>;

interface Waiter {
  res: () => void;
  rej: (e: unknown) => void;
}

/**
 * ackLines splits handles, in order, into the handle lists of ACK lines of
 * at most limit bytes ("ACK h1 h2 ...", without CRLF); a handle longer than
 * that still gets a line of its own.
 */
export function ackLines(handles: readonly string[], limit: number): string[][] {
  const lines: string[][] = [];
  let i = 0;
  while (i < handles.length) {
    let size = 4 + handles[i]!.length; // "ACK " and the first handle always go
    let j = i + 1;
    while (j < handles.length && size + 1 + handles[j]!.length <= limit) size += 1 + handles[j++]!.length;
    lines.push(handles.slice(i, j));
    i = j;
  }
  return lines;
}

/** AckQueue holds the handles acked since the last flush. */
export class AckQueue {
  #handles: string[] = [];
  #waiters: Waiter[] = [];
  #scheduled = false;
  #send: AckSender;
  #maxLine: () => number;

  /** Creates a queue writing through send, lines at most maxLine() bytes. */
  constructor(send: AckSender, maxLine: () => number) {
    this.#send = send;
    this.#maxLine = maxLine;
  }

  /** pending says whether acks wait to be written. */
  get pending(): boolean {
    return this.#handles.length > 0;
  }

  /** add queues handle; the promise settles with the server's answer. */
  add(handle: string): Promise<void> {
    return new Promise<void>((res, rej) => {
      this.#handles.push(handle);
      this.#waiters.push({ res, rej });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** flush writes every queued ack now. */
  flush(): void {
    this.#scheduled = false;
    const handles = this.#handles;
    const waiters = this.#waiters;
    if (handles.length === 0) return;
    this.#handles = [];
    this.#waiters = [];
    let i = 0;
    for (const line of ackLines(handles, this.#maxLine())) {
      this.#line(line, waiters.slice(i, i + line.length));
      i += line.length;
    }
  }

  #line(hs: string[], ws: Waiter[]): void {
    this.#send('ACK ' + hs.join(' ') + '\r\n').then(
      () => {
        for (const w of ws) w.res();
      },
      (e: unknown) => {
        const lost = e instanceof DisconnectedError || e instanceof ConnectionClosedError || !(e instanceof FibrilError);
        if (hs.length > 1 && !lost) {
          // A refused shared line: each handle on its own says which failed.
          for (let k = 0; k < hs.length; k++) this.#line([hs[k]!], [ws[k]!]);
          return;
        }
        for (const w of ws) w.rej(e);
      },
    );
  }
}
