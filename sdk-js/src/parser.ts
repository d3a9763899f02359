// The streaming wire parser (SPEC.md "Framing" and "Verbs"). It takes bytes
// as they arrive — any split of a frame across chunks, many frames in one
// chunk — and hands each complete frame to a callback. It knows both
// directions (client→server verbs are parsed too, so the shared vectors can
// be run through it), does no I/O and keeps no timers.
import { FibrilError } from './error_base.js';
import { ParseErrorCodes } from './parse_errors.js';

/** ParserState names the parser's states; the names match the Go parser's. */
export const ParserState = {
  /** OpStart: waiting for (the rest of) a control line. */
  OpStart: 'OpStart',
  /** Payload: a PUB/HPUB/MSG/HMSG control line was read; waiting for its body and CRLF. */
  Payload: 'Payload',
  /** Failed: a fatal parse error happened; the parser accepts nothing more. */
  Failed: 'Failed',
} as const;

/** ParserStateName is one of ParserState's values. */
export type ParserStateName = (typeof ParserState)[keyof typeof ParserState];

/** Frame is one parsed frame. Byte fields are views into the fed chunk. */
export type Frame =
  | { op: 'INFO'; json: string; info: Record<string, unknown> }
  | { op: 'CONNECT'; json: string; options: Record<string, unknown> }
  | { op: 'PING' }
  | { op: 'PONG' }
  | { op: 'OK'; arg: string }
  | { op: 'ERR'; text: string }
  | PubFrame
  | MsgFrame
  | { op: 'SUB'; subject: string; group?: string; sid: string; maxInFlight?: number }
  | { op: 'UNSUB'; sid: string; max?: number }
  | { op: 'ACK'; handles: string[] }
  | { op: 'NACK'; handle: string; delayMs?: number }
  | { op: 'REJECT'; handle: string }
  | { op: 'EXTEND'; handle: string; ms?: number }
  | { op: 'POLL'; topic: string; group: string; max: number; waitMs?: number }
  | { op: 'TOPIC' | 'GROUP'; action: string; args: string[]; json?: string };

/** PubFrame is a PUB or HPUB (client→server). */
export interface PubFrame {
  op: 'PUB';
  /** headers is true for HPUB. */
  headers: boolean;
  subject: string;
  reply?: string;
  /** header is the raw NATS/1.0 block (HPUB only). */
  header?: Uint8Array;
  payload: Uint8Array;
  /** crc is the announced checksum, null for "-", undefined when crc mode is off. */
  crc?: number | null;
}

/** MsgFrame is a MSG or HMSG (server→client). */
export interface MsgFrame {
  op: 'MSG';
  /** headers is true for HMSG. */
  headers: boolean;
  subject: string;
  sid: string;
  reply?: string;
  /** header is the raw NATS/1.0 block (HMSG only). */
  header?: Uint8Array;
  payload: Uint8Array;
  /** crc is the announced checksum, null for "-", undefined when crc mode is off. */
  crc?: number | null;
}

/** ParseError is a fatal parse error; code is one of ParseErrorCodes. */
export class ParseError extends FibrilError {
  /** Creates the error. */
  constructor(code: string, message: string) {
    super(code, message, { retriable: false, fatal: true });
  }
}

/** ParserOptions are the limits the parser enforces. */
export interface ParserOptions {
  /** maxControlLine is the longest control line accepted, CRLF excluded (default 4096). */
  maxControlLine?: number;
  /** maxPayload is the largest body (header + payload) accepted (default 1 MiB). */
  maxPayload?: number;
  /** crc starts the parser in CRC mode (default false). */
  crc?: boolean;
}

const NL = 0x0a;
const CR = 0x0d;
const EMPTY = new Uint8Array(0);

/**
 * Parser is the streaming frame parser. Feed it chunks; it calls onFrame for
 * every complete frame, in order, synchronously. A fatal error is thrown as
 * ParseError and leaves the parser in the Failed state.
 */
export class Parser {
  /** state is the current state (a ParserState value). */
  state: ParserStateName = ParserState.OpStart;
  /** crc is the CRC mode flag; flip it right after handling CONNECT (or after sending it). */
  crc: boolean;
  /** maxControlLine is the longest accepted control line. */
  maxControlLine: number;
  /** maxPayload is the largest accepted body; update it from INFO. */
  maxPayload: number;

  #pending: Uint8Array = EMPTY;
  #frame: PubFrame | MsgFrame | undefined;
  #hdrSize = 0;
  #size = 0;

  /** Creates a parser with the given limits. */
  constructor(opts: ParserOptions = {}) {
    this.maxControlLine = opts.maxControlLine ?? 4096;
    this.maxPayload = opts.maxPayload ?? 1024 * 1024;
    this.crc = opts.crc ?? false;
  }

  /** buffered is the number of bytes held back waiting for the rest of a frame. */
  get buffered(): number {
    return this.#pending.length;
  }

  /**
   * feed parses chunk (after anything held back). onFrame runs synchronously
   * for each frame and may change `crc` or `maxPayload`; the next frame is
   * parsed under the new settings. Throws ParseError on a fatal error.
   */
  feed(chunk: Uint8Array, onFrame: (f: Frame) => void): void {
    if (this.state === ParserState.Failed) throw new ParseError(ParseErrorCodes.ParserFailed, 'parser failed earlier');
    let buf: Uint8Array;
    if (this.#pending.length === 0) {
      buf = chunk;
    } else {
      buf = new Uint8Array(this.#pending.length + chunk.length);
      buf.set(this.#pending, 0);
      buf.set(chunk, this.#pending.length);
    }
    let pos = 0;
    try {
      while (pos < buf.length) {
        if (this.state === ParserState.OpStart) {
          const nl = buf.indexOf(NL, pos);
          if (nl < 0) {
            if (buf.length - pos > this.maxControlLine + 1) {
              throw new ParseError(ParseErrorCodes.MaxControlLine, 'control line too long');
            }
            break;
          }
          let end = nl;
          if (end > pos && buf[end - 1] === CR) end--;
          if (end - pos > this.maxControlLine) {
            throw new ParseError(ParseErrorCodes.MaxControlLine, 'control line too long');
          }
          const line = Buffer.from(buf.buffer, buf.byteOffset + pos, end - pos).toString('utf8');
          pos = nl + 1;
          const f = this.#control(line);
          if (f !== undefined) onFrame(f);
        } else {
          // Payload: body bytes, then CRLF (or a bare LF).
          const need = this.#size;
          if (buf.length - pos < need + 1) break;
          let after = pos + need;
          if (buf[after] === CR) {
            if (buf.length - after < 2) break;
            after++;
          }
          if (buf[after] !== NL) {
            throw new ParseError(ParseErrorCodes.MissingCRLF, 'body not followed by CRLF');
          }
          const f = this.#frame!;
          const body = buf.subarray(pos, pos + need);
          if (f.headers) {
            f.header = body.subarray(0, this.#hdrSize);
            f.payload = body.subarray(this.#hdrSize);
          } else {
            f.payload = body;
          }
          pos = after + 1;
          this.#frame = undefined;
          this.state = ParserState.OpStart;
          onFrame(f);
        }
      }
    } catch (e) {
      this.state = ParserState.Failed;
      this.#pending = EMPTY;
      throw e;
    }
    this.#pending = pos >= buf.length ? EMPTY : buf.slice(pos);
  }

  /** reset forgets buffered bytes and the Failed state (for a new connection). */
  reset(): void {
    this.state = ParserState.OpStart;
    this.#pending = EMPTY;
    this.#frame = undefined;
  }

  #control(line: string): Frame | undefined {
    const trimmed = line.replace(/^[ \t]+|[ \t]+$/g, '');
    if (trimmed === '') return undefined; // empty lines are ignored, as telnet users send them
    const m = /^(\S+)(?:[ \t]+(.*))?$/s.exec(trimmed)!;
    const verb = m[1]!.toUpperCase();
    const rest = m[2] ?? '';
    const args = rest === '' ? [] : rest.split(/[ \t]+/);
    switch (verb) {
      case 'PING':
        return { op: 'PING' };
      case 'PONG':
        return { op: 'PONG' };
      case '+OK':
        return { op: 'OK', arg: rest };
      case '-ERR':
        return { op: 'ERR', text: unquote(rest) };
      case 'INFO':
        return { op: 'INFO', json: rest, info: parseJSON(rest, 'INFO') };
      case 'CONNECT':
        return { op: 'CONNECT', json: rest, options: parseJSON(rest, 'CONNECT') };
      case 'PUB':
      case 'HPUB':
        return this.#pub(verb === 'HPUB', args);
      case 'MSG':
      case 'HMSG':
        return this.#msg(verb === 'HMSG', args);
      case 'SUB': {
        if (args.length < 2 || args.length > 4) throw argErr('SUB');
        const subject = subjectArg(args[0]!, true);
        if (args.length === 2) return { op: 'SUB', subject, sid: args[1]! };
        const f: Frame = { op: 'SUB', subject, group: args[1]!, sid: args[2]! };
        if (args.length === 4) f.maxInFlight = num(args[3]!);
        return f;
      }
      case 'UNSUB': {
        if (args.length < 1 || args.length > 2) throw argErr('UNSUB');
        return args.length === 2 ? { op: 'UNSUB', sid: args[0]!, max: num(args[1]!) } : { op: 'UNSUB', sid: args[0]! };
      }
      case 'ACK':
        if (args.length < 1) throw argErr('ACK');
        return { op: 'ACK', handles: args };
      case 'NACK':
        if (args.length < 1 || args.length > 2) throw argErr('NACK');
        return args.length === 2 ? { op: 'NACK', handle: args[0]!, delayMs: num(args[1]!) } : { op: 'NACK', handle: args[0]! };
      case 'REJECT':
        if (args.length !== 1) throw argErr('REJECT');
        return { op: 'REJECT', handle: args[0]! };
      case 'EXTEND':
        if (args.length < 1 || args.length > 2) throw argErr('EXTEND');
        return args.length === 2 ? { op: 'EXTEND', handle: args[0]!, ms: num(args[1]!) } : { op: 'EXTEND', handle: args[0]! };
      case 'POLL': {
        if (args.length < 3 || args.length > 4) throw argErr('POLL');
        const f: Frame = { op: 'POLL', topic: subjectArg(args[0]!, false), group: args[1]!, max: num(args[2]!) };
        if (args.length === 4) f.waitMs = num(args[3]!);
        return f;
      }
      case 'TOPIC':
      case 'GROUP':
        return manage(verb, rest);
      default:
        throw new ParseError(ParseErrorCodes.UnknownOp, `unknown protocol operation ${JSON.stringify(m[1])}`);
    }
  }

  #pub(hpub: boolean, args: string[]): undefined {
    const verb = hpub ? 'HPUB' : 'PUB';
    const base = hpub ? 3 : 2; // subject [reply] [hdr] size
    const extra = this.crc ? 1 : 0;
    if (args.length !== base + extra && args.length !== base + 1 + extra) throw argErr(verb);
    const crc = this.crc ? crcArg(args.pop()!) : undefined;
    const hasReply = args.length === base + 1;
    const f: PubFrame = {
      op: 'PUB',
      headers: hpub,
      subject: subjectArg(args[0]!, false),
      payload: EMPTY,
    };
    if (hasReply) f.reply = subjectArg(args[1]!, false);
    if (crc !== undefined) f.crc = crc;
    this.#startBody(f, hpub, args.slice(hasReply ? 2 : 1));
    return undefined;
  }

  #msg(hmsg: boolean, args: string[]): undefined {
    const verb = hmsg ? 'HMSG' : 'MSG';
    const base = hmsg ? 4 : 3; // subject sid [reply] [hdr] size
    const extra = this.crc ? 1 : 0;
    if (args.length !== base + extra && args.length !== base + 1 + extra) throw argErr(verb);
    const crc = this.crc ? crcArg(args.pop()!) : undefined;
    const hasReply = args.length === base + 1;
    const f: MsgFrame = {
      op: 'MSG',
      headers: hmsg,
      subject: subjectArg(args[0]!, false),
      sid: args[1]!,
      payload: EMPTY,
    };
    if (hasReply) f.reply = subjectArg(args[2]!, false);
    if (crc !== undefined) f.crc = crc;
    this.#startBody(f, hmsg, args.slice(hasReply ? 3 : 2));
    return undefined;
  }

  #startBody(f: PubFrame | MsgFrame, headers: boolean, sizes: string[]): void {
    let hdr = 0;
    let total: number;
    if (headers) {
      hdr = num(sizes[0]!);
      total = num(sizes[1]!);
      if (hdr > total) throw new ParseError(ParseErrorCodes.BadHeaderSize, 'header size larger than total size');
    } else {
      total = num(sizes[0]!);
    }
    if (total > this.maxPayload) {
      throw new ParseError(ParseErrorCodes.MaxPayload, `payload of ${total} bytes exceeds max_payload ${this.maxPayload}`);
    }
    this.#frame = f;
    this.#hdrSize = hdr;
    this.#size = total;
    this.state = ParserState.Payload;
  }
}

function argErr(verb: string): ParseError {
  return new ParseError(ParseErrorCodes.BadArgs, `wrong number of arguments for ${verb}`);
}

/** num parses a non-negative decimal that fits a safe integer. */
function num(s: string): number {
  if (!/^[0-9]{1,15}$/.test(s)) throw new ParseError(ParseErrorCodes.BadNumber, `bad number ${JSON.stringify(s)}`);
  return Number(s);
}

function crcArg(s: string): number | null {
  if (s === '-') return null;
  if (!/^[0-9a-f]{8}$/.test(s)) throw new ParseError(ParseErrorCodes.BadCRC, `bad crc token ${JSON.stringify(s)}`);
  return parseInt(s, 16) >>> 0;
}

/** validSubject reports whether s is a valid subject (wildcards allowed if wild). */
export function validSubject(s: string, wild: boolean): boolean {
  if (s === '') return false;
  const toks = s.split('.');
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i]!;
    if (t === '' || /[\s]/.test(t)) return false;
    if (t === '>' && (!wild || i !== toks.length - 1)) return false;
    if (t === '*' && !wild) return false;
    if (t.length > 1 && (t.includes('*') || t.includes('>')) && wild) {
      // Wildcards must stand alone in a token; inside a token they are literal in NATS.
    }
  }
  return true;
}

function subjectArg(s: string, wild: boolean): string {
  if (!validSubject(s, wild)) throw new ParseError(ParseErrorCodes.InvalidSubject, `invalid subject ${JSON.stringify(s)}`);
  return s;
}

function unquote(s: string): string {
  const t = s.trim();
  if (t.length >= 2 && t.startsWith("'") && t.endsWith("'")) return t.slice(1, -1);
  return t;
}

function parseJSON(s: string, verb: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(s);
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error('not an object');
    return v as Record<string, unknown>;
  } catch (e) {
    throw new ParseError(ParseErrorCodes.BadJSON, `${verb}: invalid JSON: ${(e as Error).message}`);
  }
}

function manage(verb: 'TOPIC' | 'GROUP', rest: string): Frame {
  // <ACTION> <name>... [<json>]; the JSON is the rest of the line from the first '{'.
  const brace = rest.indexOf('{');
  const head = (brace < 0 ? rest : rest.slice(0, brace)).trim();
  const json = brace < 0 ? undefined : rest.slice(brace).trim();
  const toks = head === '' ? [] : head.split(/[ \t]+/);
  if (toks.length < 1) throw argErr(verb);
  const f: Frame = { op: verb, action: toks[0]!.toUpperCase(), args: toks.slice(1) };
  if (json !== undefined) {
    parseJSON(json, verb);
    f.json = json;
  }
  return f;
}
