// NATS/1.0 header blocks, as carried by HPUB and HMSG:
//   NATS/1.0[ <status>[ <description>]]\r\n(<name>: <value>\r\n)*\r\n
import { InvalidArgumentError, ProtocolViolationError } from './errors.js';

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Well-known header names Fibril gives meaning to. */
export const HeaderNames = {
  /** Key: partition key (routing is xxhash64(key) % partitions). */
  Key: 'Fibril-Key',
  /** MsgId: message id for de-duplication. */
  MsgId: 'Nats-Msg-Id',
  /** TTL: a message's time to live (on a topic with allow_msg_ttl). */
  TTL: 'Nats-TTL',
  /** Delay: hold a message back after it is stored (on a topic with allow_msg_delay). */
  Delay: 'Fibril-Delay',
  /** DeliverAt: hold a message back until a time (RFC 3339). */
  DeliverAt: 'Fibril-Deliver-At',
  /** Reason: why a message was dead-lettered (max_deliveries | rejected). */
  Reason: 'Fibril-Reason',
  /** Subject: original subject of a dead-lettered message. */
  Subject: 'Fibril-Subject',
  /** Partition: original partition of a dead-lettered message. */
  Partition: 'Fibril-Partition',
  /** Seq: original sequence of a dead-lettered message. */
  Seq: 'Fibril-Seq',
  /** Deliveries: delivery count of a dead-lettered message. */
  Deliveries: 'Fibril-Deliveries',
} as const;

/**
 * MsgHeaders is an ordered multi-map of header fields. Names keep their
 * spelling on the wire; lookups ignore ASCII case.
 */
export class MsgHeaders implements Iterable<[string, string]> {
  /** status is the optional status code of the version line ("" if none). */
  status = '';
  /** description is the optional text after the status code. */
  description = '';
  #fields: [string, string][] = [];

  /** Creates headers from an object or from [name, value] pairs. */
  constructor(init?: Record<string, string | string[]> | Iterable<[string, string]>) {
    if (init === undefined) return;
    if (Symbol.iterator in Object(init)) {
      for (const [k, v] of init as Iterable<[string, string]>) this.append(k, v);
    } else {
      for (const [k, v] of Object.entries(init as Record<string, string | string[]>)) {
        for (const one of Array.isArray(v) ? v : [v]) this.append(k, one);
      }
    }
  }

  /** append adds a field; it throws InvalidArgumentError on CR/LF or a bad name. */
  append(name: string, value: string): this {
    if (!/^[!-9;-~]+$/.test(name)) throw new InvalidArgumentError(`invalid header name ${JSON.stringify(name)}`);
    if (/[\r\n]/.test(value)) throw new InvalidArgumentError(`header ${name}: value contains CR or LF`);
    this.#fields.push([name, value]);
    return this;
  }

  /** set replaces every field of that name with one value. */
  set(name: string, value: string): this {
    this.delete(name);
    return this.append(name, value);
  }

  /** get returns the first value of name, or undefined. */
  get(name: string): string | undefined {
    const n = name.toLowerCase();
    return this.#fields.find(([k]) => k.toLowerCase() === n)?.[1];
  }

  /** getAll returns every value of name in order. */
  getAll(name: string): string[] {
    const n = name.toLowerCase();
    return this.#fields.filter(([k]) => k.toLowerCase() === n).map(([, v]) => v);
  }

  /** has says whether name is present. */
  has(name: string): boolean {
    return this.get(name) !== undefined;
  }

  /** delete removes every field of that name. */
  delete(name: string): void {
    const n = name.toLowerCase();
    this.#fields = this.#fields.filter(([k]) => k.toLowerCase() !== n);
  }

  /** size is the number of fields. */
  get size(): number {
    return this.#fields.length;
  }

  /** Iterates [name, value] pairs in wire order. */
  [Symbol.iterator](): Iterator<[string, string]> {
    return this.#fields[Symbol.iterator]();
  }

  /** encode returns the wire form of the block, ending with the empty line. */
  encode(): Uint8Array {
    let s = 'NATS/1.0';
    if (this.status !== '') s += ' ' + this.status + (this.description !== '' ? ' ' + this.description : '');
    s += '\r\n';
    for (const [k, v] of this.#fields) s += `${k}: ${v}\r\n`;
    return enc.encode(s + '\r\n');
  }

  /**
   * decode parses a header block. It throws ProtocolViolationError when the
   * version line is missing. Lines without a colon are ignored, as NATS does.
   */
  static decode(block: Uint8Array): MsgHeaders {
    const text = dec.decode(block);
    const lines = text.split(/\r?\n/);
    const first = lines[0] ?? '';
    if (!first.startsWith('NATS/1.0')) throw new ProtocolViolationError('header block does not start with NATS/1.0');
    const h = new MsgHeaders();
    const rest = first.slice(8).trim();
    if (rest !== '') {
      const sp = rest.indexOf(' ');
      h.status = sp < 0 ? rest : rest.slice(0, sp);
      h.description = sp < 0 ? '' : rest.slice(sp + 1).trim();
    }
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      if (line === '') continue;
      const c = line.indexOf(':');
      if (c <= 0) continue;
      h.#fields.push([line.slice(0, c).trim(), line.slice(c + 1).trim()]);
    }
    return h;
  }
}
