// The streaming wire parser (SPEC.md "Grammar", "Verbs", "Checksums"),
// shaped like the Go parser in protocol/parser.go: a Direction, Limits, a
// CRC mode flag, next/parseSized/checkSized, the same error codes and the
// same fatal/non-fatal split. It takes bytes as they arrive (any split of a
// frame across chunks, many frames in one chunk), does no I/O and keeps no
// timers.
import { crc32 } from './crc.js';
import type { FibrilError } from './error_base.js';
import { ERROR_CLASSES, ERROR_TABLE } from './errors_gen.js';
import { type Handle, parseHandle } from './handle.js';

/** Direction says which frames a Parser accepts (Go: protocol.Direction). */
export const Direction = {
  /** ClientToServer: CONNECT PING PONG PUB HPUB SUB UNSUB POLL ACK NACK REJECT EXTEND TOPIC GROUP. */
  ClientToServer: 'client->server',
  /** ServerToClient: INFO PING PONG +OK -ERR MSG HMSG. */
  ServerToClient: 'server->client',
} as const;

/** DirectionName is one of Direction's values. */
export type DirectionName = (typeof Direction)[keyof typeof Direction];

/** Op names a command as written on the wire (Go: Op.String()). */
export type Op =
  | 'INFO' | 'CONNECT' | 'PING' | 'PONG' | '+OK' | '-ERR'
  | 'PUB' | 'HPUB' | 'SUB' | 'UNSUB' | 'MSG' | 'HMSG'
  | 'POLL' | 'ACK' | 'NACK' | 'REJECT' | 'EXTEND'
  | 'TOPIC CREATE' | 'TOPIC INFO' | 'TOPIC LIST' | 'TOPIC DELETE' | 'TOPIC REQUEUE'
  | 'GROUP CREATE' | 'GROUP INFO' | 'GROUP LIST' | 'GROUP DELETE';

/**
 * Command is one parsed frame (Go: protocol.Command). Only the fields its op
 * uses are set. header and payload are views into the bytes fed; the parser
 * never writes to them afterwards, so they stay valid.
 */
export interface Command {
  op: Op;
  /** subject: PUB/HPUB/MSG/HMSG/SUB subject, POLL topic, TOPIC/GROUP topic name. */
  subject?: string;
  /** reply: reply-to of PUB/HPUB, reply-to or ack handle of MSG/HMSG. */
  reply?: string;
  /** group: SUB queue or durable group, POLL group, GROUP CREATE/INFO/DELETE group. */
  group?: string;
  /** sid: SUB/UNSUB/MSG/HMSG subscription id ("0" for POLL deliveries). */
  sid?: string;
  /** header: HPUB/HMSG header block, "NATS/1.0" through the empty line. */
  header?: Uint8Array;
  /** payload: PUB/HPUB/MSG/HMSG body after the header block. */
  payload?: Uint8Array;
  /** crc: CRC-32 of header + payload, computed in CRC mode (also when "-" was sent). */
  crc?: number;
  /** hasCRC: the frame carried an explicit checksum token (verified against crc). */
  hasCRC?: boolean;
  /** max: UNSUB max-msgs, SUB max-inflight, POLL max. */
  max?: number;
  /** millis: POLL wait-ms, NACK delay-ms, EXTEND ms. */
  millis?: number;
  /** handles: ACK's handles, or the one handle of NACK/REJECT/EXTEND. */
  handles?: Handle[];
  /** text: -ERR text without quotes, or the argument of +OK. */
  text?: string;
  /** json: INFO/CONNECT JSON, optional TOPIC CREATE/GROUP CREATE JSON. */
  json?: string;
}

/** Limits bound what a Parser accepts (Go: protocol.Limits). */
export interface Limits {
  /** maxControlLine: longest control line, line end excluded (default 4096). */
  maxControlLine?: number;
  /** maxJSONLine: longest line carrying JSON: INFO, CONNECT, TOPIC, GROUP, +OK (default 1 MiB). */
  maxJSONLine?: number;
  /** maxPayload: largest PUB/HPUB/MSG/HMSG body (default 1 MiB). */
  maxPayload?: number;
}

/** Default limits, as SPEC.md "Limits". */
export const DefaultLimits = { maxControlLine: 4096, maxJSONLine: 1024 * 1024, maxPayload: 1024 * 1024 } as const;

/** MaxCount is the largest count argument (UNSUB max-msgs, SUB max-inflight, POLL max). */
export const MaxCount = 2 ** 31 - 1;
/** MaxMillis is the largest millisecond argument (POLL wait-ms, NACK delay-ms, EXTEND ms). */
export const MaxMillis = 2 ** 32 - 1;
/** MaxGroupName is the longest durable group name. */
export const MaxGroupName = 255;

/**
 * ParseFailure is what a parse error carries besides its code: the error is
 * an instance of the generated class for the code (e.g. CrcMismatchError),
 * with `command` set to what was parsed of a delimited frame (subject, sid,
 * reply...) so an SDK can still nack a corrupt delivery.
 */
export type ParseFailure = FibrilError & { command?: Command; detail: string };

/** parseError builds the typed error for code with a detail, as Go's Error.Text(). */
export function parseError(code: string, detail: string, command?: Command): ParseFailure {
  const spec = ERROR_TABLE[code];
  const cls = ERROR_CLASSES[code]!;
  const e = new cls(detail === '' ? spec?.text : `${spec?.text}: ${detail}`) as ParseFailure;
  e.detail = detail;
  if (command !== undefined) e.command = command;
  return e;
}

/** ParseHandler receives commands and non-fatal errors, synchronously, in order. */
export interface ParseHandler {
  /** command is called once per valid frame. */
  command(c: Command): void;
  /** error is called for a non-fatal error: the frame was skipped. */
  error?(e: ParseFailure): void;
}

const NL = 0x0a;
const CR = 0x0d;
const SP = 0x20;
const TAB = 0x09;
const EMPTY = new Uint8Array(0);
const NUM_INVALID = -1;
const NUM_OVERFLOW = -2;

/**
 * Parser is a streaming parser for one direction of one connection. feed
 * appends bytes and handles every complete frame; a partial frame is kept
 * until more bytes come. Non-fatal errors go to handler.error and parsing
 * goes on after the skipped frame; a fatal error (its table row says fatal)
 * is thrown, and the Parser accepts nothing more (the owner closes).
 */
export class Parser {
  /** direction is the direction the parser was made for. */
  readonly direction: DirectionName;
  #crc = false;
  #lim: Required<Limits>;
  #buf: Uint8Array = EMPTY;
  #pending = 0;
  #consumed = 0;
  #failed: ParseFailure | undefined;

  /** Creates a parser for dir with CRC mode off; missing limits get defaults. */
  constructor(dir: DirectionName, lim: Limits = {}) {
    this.direction = dir;
    this.#lim = withDefaults(lim);
  }

  /** setCRC turns CRC mode on or off; from inside the handler it affects the next frame. */
  setCRC(on: boolean): void {
    this.#crc = on;
  }

  /** crc reports whether CRC mode is on. */
  get crc(): boolean {
    return this.#crc;
  }

  /** limits returns the limits in force. */
  get limits(): Required<Limits> {
    return { ...this.#lim };
  }

  /** setLimits replaces the limits (a client passes INFO's max_payload). */
  setLimits(lim: Limits): void {
    this.#lim = withDefaults(lim);
  }

  /** buffered is the number of bytes held back (a partial frame). */
  get buffered(): number {
    return this.#buf.length;
  }

  /**
   * pending is, while a frame whose size is known waits for its body, the
   * fewest bytes that frame can still take in total (body plus a bare LF);
   * 0 otherwise. feed does not re-parse until that many bytes are buffered.
   */
  get pending(): number {
    return this.#pending;
  }

  /** consumed counts every byte consumed so far (frames handled or skipped). */
  get consumed(): number {
    return this.#consumed;
  }

  /** failed is the fatal error that stopped the parser, if any. */
  get failed(): ParseFailure | undefined {
    return this.#failed;
  }

  /** feed parses chunk after what was held back. Throws the fatal error, if one happens. */
  feed(chunk: Uint8Array, h: ParseHandler): void {
    if (this.#failed !== undefined) throw this.#failed;
    let buf: Uint8Array;
    if (this.#buf.length === 0) buf = chunk;
    else {
      buf = new Uint8Array(this.#buf.length + chunk.length);
      buf.set(this.#buf, 0);
      buf.set(chunk, this.#buf.length);
    }
    this.#buf = EMPTY;
    let pos = 0;
    while (pos < buf.length) {
      if (this.#pending > 0 && buf.length - pos < this.#pending) break;
      this.#pending = 0;
      const b = buf.subarray(pos);
      const r = this.next(b);
      if (r.err !== undefined) {
        if (r.err.fatal) {
          this.#failed = r.err;
          throw r.err;
        }
        pos += r.n;
        this.#consumed += r.n;
        h.error?.(r.err);
        continue;
      }
      if (r.n === 0) break;
      pos += r.n;
      this.#consumed += r.n;
      if (r.cmd !== undefined) h.command(r.cmd);
    }
    if (pos < buf.length) this.#buf = buf.slice(pos);
  }

  /**
   * next parses one frame at the start of b: n is 0 when b holds only part
   * of a frame; cmd is undefined for an empty line or an error.
   */
  next(b: Uint8Array): { n: number; cmd?: Command; err?: ParseFailure } {
    const eol = b.indexOf(NL);
    if (eol < 0) {
      if (b.length > this.#lineLimit(b) + 1) return { n: 0, err: parseError('max_control_line', this.#limitDetail(b)) };
      return { n: 0 };
    }
    let line = b.subarray(0, eol);
    if (line.length > 0 && line[line.length - 1] === CR) line = line.subarray(0, line.length - 1);
    if (line.length > this.#lineLimit(line)) return { n: 0, err: parseError('max_control_line', this.#limitDetail(line)) };
    const [verb, rest] = nextToken(line);
    if (verb.length === 0) return { n: eol + 1 };
    return this.direction === Direction.ClientToServer ? this.#fromClient(b, eol, verb, rest) : this.#fromServer(b, eol, verb, rest);
  }

  #fromClient(b: Uint8Array, eol: number, verb: Uint8Array, rest: Uint8Array): { n: number; cmd?: Command; err?: ParseFailure } {
    const v = upper(verb);
    switch (v) {
      case 'PUB':
      case 'HPUB':
        return this.#parseSized(b, eol, rest, v);
      case 'SUB':
        return finish(eol, parseSub(rest));
      case 'ACK':
        return finish(eol, parseAck(rest));
      case 'PING':
      case 'PONG':
        return finish(eol, parseNoArgs(rest, v));
      case 'POLL':
        return finish(eol, parsePoll(rest));
      case 'NACK':
      case 'REJECT':
      case 'EXTEND':
        return finish(eol, parseHandleCmd(rest, v));
      case 'UNSUB':
        return finish(eol, parseUnsub(rest));
      case 'TOPIC':
        return finish(eol, parseTopic(rest));
      case 'GROUP':
        return finish(eol, parseGroup(rest));
      case 'CONNECT': {
        const js = trim(rest);
        if (js.length === 0) return { n: 0, err: parseError('invalid_connect', 'CONNECT needs a JSON object') };
        return { n: eol + 1, cmd: { op: 'CONNECT', json: str(js) } };
      }
    }
    return { n: eol + 1, err: parseError('unknown_op', quoteDetail(verb)) };
  }

  #fromServer(b: Uint8Array, eol: number, verb: Uint8Array, rest: Uint8Array): { n: number; cmd?: Command; err?: ParseFailure } {
    const v = upper(verb);
    switch (v) {
      case 'MSG':
      case 'HMSG':
        return this.#parseSized(b, eol, rest, v);
      case '+OK':
        return { n: eol + 1, cmd: { op: '+OK', text: str(trim(rest)) } };
      case 'PING':
      case 'PONG':
        return finish(eol, parseNoArgs(rest, v));
      case '-ERR': {
        let t = trim(rest);
        if (t.length >= 2 && t[0] === 0x27 && t[t.length - 1] === 0x27) t = t.subarray(1, t.length - 1);
        return { n: eol + 1, cmd: { op: '-ERR', text: str(t) } };
      }
      case 'INFO': {
        const js = trim(rest);
        if (js.length === 0) return { n: eol + 1, err: parseError('invalid_args', 'INFO needs a JSON object') };
        return { n: eol + 1, cmd: { op: 'INFO', json: str(js) } };
      }
    }
    return { n: eol + 1, err: parseError('unknown_op', quoteDetail(verb)) };
  }

  #parseSized(b: Uint8Array, eol: number, rest: Uint8Array, op: 'PUB' | 'HPUB' | 'MSG' | 'HMSG'): { n: number; cmd?: Command; err?: ParseFailure } {
    const a = split(rest);
    const hasHdr = op === 'HPUB' || op === 'HMSG';
    const hasSid = op === 'MSG' || op === 'HMSG';
    let fixed = 2 + (hasHdr ? 1 : 0) + (hasSid ? 1 : 0) + (this.#crc ? 1 : 0);
    if (a.length !== fixed && a.length !== fixed + 1) {
      return { n: 0, err: parseError('bad_frame', `${op} has ${a.length} arguments, want ${fixed} or ${fixed + 1}`) };
    }
    const c: Command = { op, subject: str(a[0]!) };
    let i = 1;
    if (hasSid) c.sid = str(a[i++]!);
    let replyTok: Uint8Array | undefined;
    if (a.length === fixed + 1) {
      replyTok = a[i++]!;
      c.reply = str(replyTok);
    }
    let hdr = 0;
    if (hasHdr) {
      const v = parseUint(a[i]!, Number.MAX_SAFE_INTEGER);
      if (v === NUM_INVALID) return { n: 0, err: parseError('bad_frame', 'header size ' + quoteDetail(a[i]!)) };
      hdr = v === NUM_OVERFLOW ? Number.MAX_SAFE_INTEGER : v;
      i++;
    }
    const total = parseUint(a[i]!, this.#lim.maxPayload);
    if (total === NUM_INVALID) return { n: 0, err: parseError('bad_frame', 'size ' + quoteDetail(a[i]!)) };
    if (total === NUM_OVERFLOW) {
      return { n: 0, err: parseError('max_payload', `size ${quoteDetail(a[i]!)}, limit ${this.#lim.maxPayload}`) };
    }
    if (hdr > total) return { n: 0, err: parseError('bad_frame', 'header size larger than total size') };
    i++;
    const crcTok = this.#crc ? a[i]! : undefined;
    const start = eol + 1;
    const end = start + total;
    if (b.length < end + 1) {
      this.#pending = end + 1; // at least the body and a bare LF
      return { n: 0 };
    }
    let next = end + 1;
    if (b[end] === CR) {
      if (b.length < end + 2) {
        this.#pending = end + 2;
        return { n: 0 };
      }
      if (b[end + 1] !== NL) return { n: 0, err: parseError('bad_frame', 'payload not followed by CRLF') };
      next = end + 2;
    } else if (b[end] !== NL) {
      return { n: 0, err: parseError('bad_frame', 'payload not followed by CRLF') };
    }
    const body = b.subarray(start, end);
    if (hasHdr) c.header = body.subarray(0, hdr);
    c.payload = body.subarray(hdr);
    const err = this.#checkSized(c, a[0]!, replyTok, body, crcTok, hasHdr);
    if (err !== undefined) return { n: next, err };
    return { n: next, cmd: c };
  }

  // checkSized runs the non-fatal checks of a delimited frame, in SPEC.md's
  // order: subject, reply-to, sid, checksum token, checksum, header.
  #checkSized(c: Command, subj: Uint8Array, reply: Uint8Array | undefined, body: Uint8Array, crcTok: Uint8Array | undefined, hasHdr: boolean): ParseFailure | undefined {
    let code = checkSubject(subj, false);
    if (code !== '') return parseError(code, 'subject ' + quoteDetail(subj), c);
    if (reply !== undefined) {
      code = checkSubject(reply, false);
      if (code !== '') return parseError(code, 'reply-to ' + quoteDetail(reply), c);
    }
    if (c.sid !== undefined && !validToken(enc(c.sid))) return parseError('invalid_args', 'sid ' + quoteDetail(enc(c.sid)), c);
    if (this.#crc) {
      let want = 0;
      let given = false;
      if (crcTok!.length === 1 && crcTok![0] === 0x2d && this.direction === Direction.ClientToServer) {
        given = false;
      } else {
        const v = parseHex8(crcTok!);
        if (v === undefined) return parseError('invalid_crc_token', quoteDetail(crcTok!), c);
        want = v;
        given = true;
      }
      c.crc = crc32(body);
      c.hasCRC = given;
      if (given && c.crc !== want) {
        return parseError('crc_mismatch', `got ${hex8(want)}, computed ${hex8(c.crc)}`, c);
      }
    }
    // A header size of 0 is a frame without headers, as in NATS.
    if (hasHdr && c.header!.length > 0 && !validHeaderBlock(c.header!)) return parseError('invalid_header', quoteDetail(c.header!), c);
    return undefined;
  }

  #lineLimit(line: Uint8Array): number {
    const v = upper(nextToken(line)[0]);
    return v === 'CONNECT' || v === 'INFO' || v === '+OK' || v === 'TOPIC' || v === 'GROUP' ? this.#lim.maxJSONLine : this.#lim.maxControlLine;
  }

  #limitDetail(line: Uint8Array): string {
    return `limit ${this.#lineLimit(line)} bytes`;
  }
}

function withDefaults(l: Limits): Required<Limits> {
  const r = {
    maxControlLine: l.maxControlLine && l.maxControlLine > 0 ? l.maxControlLine : DefaultLimits.maxControlLine,
    maxJSONLine: l.maxJSONLine && l.maxJSONLine > 0 ? l.maxJSONLine : DefaultLimits.maxJSONLine,
    maxPayload: l.maxPayload && l.maxPayload > 0 ? l.maxPayload : DefaultLimits.maxPayload,
  };
  if (r.maxJSONLine < r.maxControlLine) r.maxJSONLine = r.maxControlLine;
  return r;
}

function finish(eol: number, r: Command | ParseFailure): { n: number; cmd?: Command; err?: ParseFailure } {
  if (r instanceof Error) return { n: eol + 1, err: r };
  return { n: eol + 1, cmd: r };
}

function parseNoArgs(rest: Uint8Array, op: 'PING' | 'PONG'): Command | ParseFailure {
  if (nextToken(rest)[0].length !== 0) return parseError('invalid_args', `${op} takes no arguments`);
  return { op };
}

function argCount(op: Op, n: number, want: string): ParseFailure {
  return parseError('invalid_args', `${op} has ${n} arguments, want ${want}`);
}

function number(tok: Uint8Array, max: number, name: string): number | ParseFailure {
  const v = parseUint(tok, max);
  if (v === NUM_INVALID) return parseError('invalid_number', `${name} ${quoteDetail(tok)}`);
  if (v === NUM_OVERFLOW) return parseError('number_overflow', `${name} ${quoteDetail(tok)}, limit ${max}`);
  return v;
}

function parseSub(rest: Uint8Array): Command | ParseFailure {
  const a = split(rest);
  if (a.length < 2 || a.length > 4) return argCount('SUB', a.length, '2 to 4');
  const c: Command = { op: 'SUB', subject: str(a[0]!) };
  let groupTok: Uint8Array | undefined;
  let sidTok: Uint8Array;
  if (a.length === 2) sidTok = a[1]!;
  else {
    groupTok = a[1]!;
    sidTok = a[2]!;
    c.group = str(groupTok);
  }
  c.sid = str(sidTok);
  const code = checkSubject(a[0]!, true);
  if (code !== '') return parseError(code, 'subject ' + quoteDetail(a[0]!));
  if (groupTok !== undefined && !validToken(groupTok)) return parseError('invalid_args', 'group ' + quoteDetail(groupTok));
  if (!validToken(sidTok) || (sidTok.length === 1 && sidTok[0] === 0x30)) {
    return parseError('invalid_args', `sid ${quoteDetail(sidTok)} (sid 0 is reserved for POLL)`);
  }
  if (a.length === 4) {
    const v = number(a[3]!, MaxCount, 'max-inflight');
    if (typeof v !== 'number') return v;
    c.max = v;
  }
  return c;
}

function parseUnsub(rest: Uint8Array): Command | ParseFailure {
  const a = split(rest);
  if (a.length < 1 || a.length > 2) return argCount('UNSUB', a.length, '1 or 2');
  const c: Command = { op: 'UNSUB', sid: str(a[0]!) };
  if (!validToken(a[0]!)) return parseError('invalid_args', 'sid ' + quoteDetail(a[0]!));
  if (a.length === 2) {
    const v = number(a[1]!, MaxCount, 'max-msgs');
    if (typeof v !== 'number') return v;
    c.max = v;
  }
  return c;
}

function parsePoll(rest: Uint8Array): Command | ParseFailure {
  const a = split(rest);
  if (a.length < 3 || a.length > 4) return argCount('POLL', a.length, '3 or 4');
  const c: Command = { op: 'POLL', subject: str(a[0]!), group: str(a[1]!) };
  const code = checkSubject(a[0]!, false);
  if (code !== '') return parseError(code, 'topic ' + quoteDetail(a[0]!));
  if (!validGroupName(a[1]!)) return parseError('invalid_name', quoteDetail(a[1]!));
  const v = number(a[2]!, MaxCount, 'max');
  if (typeof v !== 'number') return v;
  if (v === 0) return parseError('invalid_args', 'POLL max must be at least 1');
  c.max = v;
  if (a.length === 4) {
    const w = number(a[3]!, MaxMillis, 'wait-ms');
    if (typeof w !== 'number') return w;
    c.millis = w;
  }
  return c;
}

function parseAck(rest: Uint8Array): Command | ParseFailure {
  const a = split(rest);
  const handles: Handle[] = [];
  for (const tok of a) {
    const h = parseHandle(str(tok));
    if (h === undefined) return parseError('invalid_handle', quoteDetail(tok));
    handles.push(h);
  }
  if (handles.length === 0) return argCount('ACK', 0, 'at least 1');
  return { op: 'ACK', handles };
}

function parseHandleCmd(rest: Uint8Array, op: 'NACK' | 'REJECT' | 'EXTEND'): Command | ParseFailure {
  const a = split(rest);
  const max = op === 'REJECT' ? 1 : 2;
  if (a.length < 1 || a.length > max) return argCount(op, a.length, max === 1 ? '1' : '1 or 2');
  const h = parseHandle(str(a[0]!));
  if (h === undefined) return parseError('invalid_handle', quoteDetail(a[0]!));
  const c: Command = { op, handles: [h] };
  if (a.length === 2) {
    const v = number(a[1]!, MaxMillis, op === 'EXTEND' ? 'ms' : 'delay-ms');
    if (typeof v !== 'number') return v;
    c.millis = v;
  }
  return c;
}

function parseTopic(rest: Uint8Array): Command | ParseFailure {
  const [sub, r1] = nextToken(rest);
  const s = upper(sub);
  if (s === 'LIST') {
    if (nextToken(r1)[0].length !== 0) return argCount('TOPIC LIST', 1, '0');
    return { op: 'TOPIC LIST' };
  }
  if (s !== 'CREATE' && s !== 'INFO' && s !== 'DELETE' && s !== 'REQUEUE') return parseError('invalid_args', 'TOPIC needs CREATE, INFO, LIST, DELETE or REQUEUE');
  const op = `TOPIC ${s}` as Op;
  const [name, r2] = nextToken(r1);
  if (name.length === 0) return argCount(op, 0, '1');
  const code = checkSubject(name, false);
  if (code !== '') return parseError(code, 'topic ' + quoteDetail(name));
  const js = trim(r2);
  if (op !== 'TOPIC CREATE' && op !== 'TOPIC REQUEUE' && js.length !== 0) return argCount(op, 2, '1');
  const c: Command = { op, subject: str(name) };
  if (js.length !== 0) c.json = str(js);
  return c;
}

function parseGroup(rest: Uint8Array): Command | ParseFailure {
  const [sub, r1] = nextToken(rest);
  const s = upper(sub);
  if (s !== 'CREATE' && s !== 'INFO' && s !== 'LIST' && s !== 'DELETE') return parseError('invalid_args', 'GROUP needs CREATE, INFO, LIST or DELETE');
  const op = `GROUP ${s}` as Op;
  const [topic, r2] = nextToken(r1);
  if (topic.length === 0) return argCount(op, 0, 'at least 1');
  const code = checkSubject(topic, false);
  if (code !== '') return parseError(code, 'topic ' + quoteDetail(topic));
  let r3 = r2;
  let group: Uint8Array | undefined;
  if (op !== 'GROUP LIST') {
    [group, r3] = nextToken(r2);
    if (group.length === 0) return argCount(op, 1, '2');
    if (!validGroupName(group)) return parseError('invalid_name', quoteDetail(group));
  }
  const js = trim(r3);
  if (op !== 'GROUP CREATE' && js.length !== 0) return parseError('invalid_args', `${op} has too many arguments`);
  const c: Command = { op, subject: str(topic) };
  if (group !== undefined) c.group = str(group);
  if (js.length !== 0) c.json = str(js);
  return c;
}

// ---- lexing helpers (Go: lex.go) ----

const utf8 = new TextDecoder();
const utf8enc = new TextEncoder();

function str(b: Uint8Array): string {
  return utf8.decode(b);
}

function enc(s: string): Uint8Array {
  return utf8enc.encode(s);
}

function upper(tok: Uint8Array): string {
  if (tok.length > 8) return '';
  let s = '';
  for (const c of tok) s += String.fromCharCode(c >= 0x61 && c <= 0x7a ? c - 0x20 : c);
  return s;
}

function isSpace(c: number | undefined): boolean {
  return c === SP || c === TAB;
}

/** nextToken returns the first token of b and the rest after it. */
function nextToken(b: Uint8Array): [Uint8Array, Uint8Array] {
  let i = 0;
  while (i < b.length && isSpace(b[i])) i++;
  let j = i;
  while (j < b.length && !isSpace(b[j])) j++;
  return [b.subarray(i, j), b.subarray(j)];
}

function split(b: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (;;) {
    const [tok, rest] = nextToken(b);
    if (tok.length === 0) return out;
    out.push(tok);
    b = rest;
  }
}

// trim drops leading spaces/tabs and trailing spaces/tabs/CR/LF (Go: trimSpace).
function trim(b: Uint8Array): Uint8Array {
  let i = 0;
  let j = b.length;
  while (i < j && isSpace(b[i])) i++;
  while (j > i && (isSpace(b[j - 1]) || b[j - 1] === CR || b[j - 1] === NL)) j--;
  return b.subarray(i, j);
}

/** parseUint parses a non-empty run of ASCII digits no larger than max. */
function parseUint(b: Uint8Array, max: number): number {
  if (b.length === 0) return NUM_INVALID;
  let v = 0;
  let over = false;
  for (const c of b) {
    const d = c - 0x30;
    if (d < 0 || d > 9) return NUM_INVALID;
    if (!over) {
      v = v * 10 + d;
      if (v > Number.MAX_SAFE_INTEGER) over = true;
    }
  }
  if (over || v > max) return NUM_OVERFLOW;
  return v;
}

function parseHex8(b: Uint8Array): number | undefined {
  if (b.length !== 8) return undefined;
  let v = 0;
  for (const c of b) {
    let d: number;
    if (c >= 0x30 && c <= 0x39) d = c - 0x30;
    else if (c >= 0x61 && c <= 0x66) d = c - 0x61 + 10;
    else return undefined;
    v = v * 16 + d;
  }
  return v;
}

function hex8(v: number): string {
  return (v >>> 0).toString(16).padStart(8, '0');
}

/**
 * checkSubject returns "" for a valid subject, else the error code:
 * invalid_subject or (wildcards false) wildcard_not_allowed.
 */
export function checkSubject(s: Uint8Array | string, wildcards: boolean): string {
  if (typeof s === 'string') s = enc(s);
  if (s.length === 0) return 'invalid_subject';
  if (!validUTF8(s)) return 'invalid_subject'; // names must round-trip byte for byte
  let wild = false;
  let start = 0;
  for (let i = 0; i <= s.length; i++) {
    if (i < s.length) {
      const c = s[i]!;
      if (c <= SP || c === 0x7f) return 'invalid_subject';
      if (c !== 0x2e) continue;
    }
    const len = i - start;
    if (len === 0) return 'invalid_subject';
    if (len === 1 && s[start] === 0x2a) wild = true;
    else if (len === 1 && s[start] === 0x3e) {
      if (i !== s.length) return 'invalid_subject';
      wild = true;
    } else {
      for (let k = start; k < i; k++) if (s[k] === 0x2a || s[k] === 0x3e) return 'invalid_subject';
    }
    start = i + 1;
  }
  if (wild && !wildcards) return 'wildcard_not_allowed';
  return '';
}

const utf8Fatal = new TextDecoder('utf-8', { fatal: true });

/** validUTF8 reports whether b is valid UTF-8 (ASCII needs no decoder). */
function validUTF8(b: Uint8Array): boolean {
  for (const c of b) {
    if (c >= 0x80) {
      try {
        utf8Fatal.decode(b);
        return true;
      } catch {
        return false;
      }
    }
  }
  return true;
}

/** validGroupName: 1 to 255 bytes from A-Z a-z 0-9 _ -. */
export function validGroupName(b: Uint8Array | string): boolean {
  if (typeof b === 'string') b = enc(b);
  if (b.length === 0 || b.length > MaxGroupName) return false;
  for (const c of b) {
    const ok = (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c === 0x5f || c === 0x2d;
    if (!ok) return false;
  }
  return true;
}

/** validToken: a non-empty run of bytes above 0x20 (not 0x7f), as a sid or queue group. */
export function validToken(b: Uint8Array | string): boolean {
  if (typeof b === 'string') b = enc(b);
  if (b.length === 0) return false;
  for (const c of b) if (c <= SP || c === 0x7f) return false;
  return true;
}

function validHeaderBlock(h: Uint8Array): boolean {
  const min = 8 + 4;
  if (h.length < min) return false;
  for (let i = 0; i < 8; i++) if (h[i] !== 'NATS/1.0'.charCodeAt(i)) return false;
  const c = h[8];
  if (c !== SP && c !== CR) return false;
  const n = h.length;
  return h[n - 4] === CR && h[n - 3] === NL && h[n - 2] === CR && h[n - 1] === NL;
}

function quoteDetail(b: Uint8Array): string {
  const max = 64;
  let out = '"';
  for (let i = 0; i < b.length; i++) {
    if (i === max) {
      out += '...';
      break;
    }
    const c = b[i]!;
    if (c < 0x20 || c >= 0x7f || c === 0x22 || c === 0x27 || c === 0x5c) out += '\\x' + hex8(c).slice(6);
    else out += String.fromCharCode(c);
  }
  return out + '"';
}
