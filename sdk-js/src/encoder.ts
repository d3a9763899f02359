// Encoders for every client→server frame (SPEC.md "Verbs"), plus MSG/HMSG,
// INFO and the answer lines so tests and vectors can round-trip. Each returns
// a fresh Buffer holding the whole frame. Arguments are validated: a bad
// subject or group name throws the table's error (InvalidSubjectError,
// WildcardNotAllowedError, InvalidNameError), a bad token or count
// InvalidArgumentError; nothing is written.
import { crc32, crcHex } from './crc.js';
import { ERROR_CLASSES, InvalidArgumentError } from './errors.js';
import { HeaderNames, MsgHeaders } from './headers.js';
import { checkSubject, validGroupName, validToken } from './parser.js';
import type { PublishOptions } from './types.js';

const CRLF = '\r\n';

// Subject and group-name checks raise the table's code (invalid_subject,
// wildcard_not_allowed, invalid_name), as the server would, so callers see
// one code whichever side refused.
function subj(s: string, wild: boolean, what = 'subject'): string {
  const code = checkSubject(s, wild);
  if (code !== '') throw new ERROR_CLASSES[code]!(`${what} ${JSON.stringify(s)}`);
  return s;
}

function token(s: string, what: string): string {
  if (!validToken(s)) throw new InvalidArgumentError(`invalid ${what} ${JSON.stringify(s)}`);
  return s;
}

function groupName(s: string): string {
  if (!validGroupName(s)) throw new ERROR_CLASSES['invalid_name']!(`group ${JSON.stringify(s)}: 1 to 255 of A-Z a-z 0-9 _ -`);
  return s;
}

function count(n: number, what: string): string {
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`invalid ${what} ${n}`);
  return String(n);
}

/** encodeConnect encodes `CONNECT <json>`. */
export function encodeConnect(options: Record<string, unknown>): Buffer {
  return Buffer.from(`CONNECT ${JSON.stringify(options)}${CRLF}`);
}

/** encodeInfo encodes `INFO <json>`. */
export function encodeInfo(info: Record<string, unknown>): Buffer {
  return Buffer.from(`INFO ${JSON.stringify(info)}${CRLF}`);
}

/** encodePing encodes `PING`. */
export function encodePing(): Buffer {
  return Buffer.from(`PING${CRLF}`);
}

/** encodePong encodes `PONG`. */
export function encodePong(): Buffer {
  return Buffer.from(`PONG${CRLF}`);
}

/** encodeOk encodes `+OK` with an optional argument. */
export function encodeOk(arg?: string): Buffer {
  return Buffer.from(arg === undefined || arg === '' ? `+OK${CRLF}` : `+OK ${arg}${CRLF}`);
}

/** encodeErr encodes `-ERR '<text>'`. */
export function encodeErr(text: string): Buffer {
  return Buffer.from(`-ERR '${text}'${CRLF}`);
}

/** BodyFrame describes the variable part of PUB/HPUB/MSG/HMSG. */
export interface BodyFrame {
  /** subject the message is published to or was delivered on. */
  subject: string;
  /** reply is the reply-to subject (an ack handle on deliveries). */
  reply?: string;
  /** header is an encoded NATS/1.0 block; when set, HPUB/HMSG is used. */
  header?: Uint8Array;
  /** payload is the message body. */
  payload: Uint8Array;
  /**
   * crc: false/undefined = no crc token; true = compute it; a number = use it
   * as given (tests corrupt it on purpose); null = send "-".
   */
  crc?: boolean | number | null;
}

function crcToken(f: BodyFrame): string {
  if (f.crc === undefined || f.crc === false) return '';
  if (f.crc === null) return ' -';
  if (f.crc === true) return ' ' + crcHex(f.header ? crc32(f.header, f.payload) : crc32(f.payload));
  return ' ' + crcHex(f.crc);
}

function body(line: string, f: BodyFrame): Buffer {
  const head = Buffer.from(line);
  const parts = f.header ? [head, f.header, f.payload] : [head, f.payload];
  parts.push(Buffer.from(CRLF));
  return Buffer.concat(parts);
}

/** encodePub encodes PUB, or HPUB when f.header is set. */
export function encodePub(f: BodyFrame): Buffer {
  const s = subj(f.subject, false);
  const r = f.reply !== undefined ? ' ' + subj(f.reply, false, 'reply subject') : '';
  const sizes = f.header ? `${f.header.length} ${f.header.length + f.payload.length}` : `${f.payload.length}`;
  return body(`${f.header ? 'HPUB' : 'PUB'} ${s}${r} ${sizes}${crcToken(f)}${CRLF}`, f);
}

/** encodeMsg encodes MSG, or HMSG when f.header is set. */
export function encodeMsg(f: BodyFrame & { sid: string }): Buffer {
  const s = subj(f.subject, false);
  const r = f.reply !== undefined ? ' ' + subj(f.reply, false, 'reply subject') : '';
  const sizes = f.header ? `${f.header.length} ${f.header.length + f.payload.length}` : `${f.payload.length}`;
  return body(`${f.header ? 'HMSG' : 'MSG'} ${s} ${token(f.sid, 'sid')}${r} ${sizes}${crcToken(f)}${CRLF}`, f);
}

/** encodeSub encodes `SUB <subject> [<group>] <sid> [<max-inflight>]`. */
export function encodeSub(subject: string, sid: string, group?: string, maxInFlight?: number): Buffer {
  let line = `SUB ${subj(subject, true)}`;
  if (group !== undefined) line += ' ' + token(group, 'group');
  line += ' ' + token(sid, 'sid');
  if (maxInFlight !== undefined) {
    if (group === undefined) throw new InvalidArgumentError('maxInFlight needs a group');
    line += ' ' + count(maxInFlight, 'maxInFlight');
  }
  return Buffer.from(line + CRLF);
}

/** encodeUnsub encodes `UNSUB <sid> [<max-msgs>]`. */
export function encodeUnsub(sid: string, max?: number): Buffer {
  return Buffer.from(`UNSUB ${token(sid, 'sid')}${max !== undefined ? ' ' + count(max, 'max') : ''}${CRLF}`);
}

/** encodeAck encodes `ACK <handle> [<handle> ...]`. */
export function encodeAck(handles: string[]): Buffer {
  if (handles.length === 0) throw new InvalidArgumentError('ACK needs at least one handle');
  return Buffer.from(`ACK ${handles.map((h) => token(h, 'handle')).join(' ')}${CRLF}`);
}

/** encodeNack encodes `NACK <handle> [<delay-ms>]`. */
export function encodeNack(handle: string, delayMs?: number): Buffer {
  return Buffer.from(`NACK ${token(handle, 'handle')}${delayMs !== undefined ? ' ' + count(Math.round(delayMs), 'delay') : ''}${CRLF}`);
}

/** encodeReject encodes `REJECT <handle>`. */
export function encodeReject(handle: string): Buffer {
  return Buffer.from(`REJECT ${token(handle, 'handle')}${CRLF}`);
}

/** encodeExtend encodes `EXTEND <handle> [<ms>]`. */
export function encodeExtend(handle: string, ms?: number): Buffer {
  return Buffer.from(`EXTEND ${token(handle, 'handle')}${ms !== undefined ? ' ' + count(Math.round(ms), 'ms') : ''}${CRLF}`);
}

/** encodePoll encodes `POLL <topic> <group> <max> [<wait-ms>]`. */
export function encodePoll(topic: string, group: string, max: number, waitMs?: number): Buffer {
  let line = `POLL ${subj(topic, false, 'topic')} ${groupName(group)} ${count(max, 'max')}`;
  if (waitMs !== undefined) line += ' ' + count(Math.round(waitMs), 'wait');
  return Buffer.from(line + CRLF);
}

/**
 * encodeManage encodes a management command: `TOPIC|GROUP <ACTION> <args...> [<json>]`.
 */
export function encodeManage(verb: 'TOPIC' | 'GROUP', action: string, args: string[], config?: Record<string, unknown>): Buffer {
  let line = `${verb} ${token(action, 'action')}`;
  args.forEach((a, i) => {
    line += ' ' + (i === 0 ? subj(a, false, 'topic') : groupName(a));
  });
  if (config !== undefined) line += ' ' + JSON.stringify(config);
  return Buffer.from(line + CRLF);
}

const EMPTY = new Uint8Array(0);
const utf8 = new TextEncoder();

/**
 * encodePublish turns a publish call into its PUB or HPUB frame: opts' key,
 * msgId, ttlMs, delayMs and deliverAt become headers beside opts.headers;
 * crc adds the checksum token. Throws InvalidArgumentError for a bad
 * option and MaxPayloadError when the body exceeds maxPayload (INFO
 * max_payload, if known).
 */
export function encodePublish(
  subject: string,
  data: Uint8Array | string | undefined,
  opts: PublishOptions,
  maxPayload: number | undefined,
  crc: boolean,
): Buffer {
  const payload = data === undefined ? EMPTY : typeof data === 'string' ? utf8.encode(data) : data;
  let hdrs: MsgHeaders | undefined;
  if (opts.ttlMs !== undefined && !(Number.isFinite(opts.ttlMs) && opts.ttlMs > 0)) {
    throw new InvalidArgumentError(`ttlMs ${opts.ttlMs}: a TTL is more than 0 ms`);
  }
  if (opts.delayMs !== undefined && !(Number.isFinite(opts.delayMs) && opts.delayMs > 0)) {
    throw new InvalidArgumentError(`delayMs ${opts.delayMs}: a delay is more than 0 ms`);
  }
  if (opts.deliverAt !== undefined && Number.isNaN(opts.deliverAt.getTime())) {
    throw new InvalidArgumentError('deliverAt is not a valid Date');
  }
  if (
    opts.headers !== undefined || opts.key !== undefined || opts.msgId !== undefined || opts.ttlMs !== undefined ||
    opts.delayMs !== undefined || opts.deliverAt !== undefined
  ) {
    hdrs = new MsgHeaders(opts.headers instanceof MsgHeaders ? [...opts.headers] : opts.headers);
    if (opts.headers instanceof MsgHeaders) {
      hdrs.status = opts.headers.status;
      hdrs.description = opts.headers.description;
    }
    if (opts.key !== undefined) hdrs.set(HeaderNames.Key, opts.key);
    if (opts.msgId !== undefined) hdrs.set(HeaderNames.MsgId, opts.msgId);
    if (opts.ttlMs !== undefined) hdrs.set(HeaderNames.TTL, `${Math.max(1, Math.round(opts.ttlMs))}ms`);
    if (opts.delayMs !== undefined) hdrs.set(HeaderNames.Delay, `${Math.max(1, Math.round(opts.delayMs))}ms`);
    if (opts.deliverAt !== undefined) hdrs.set(HeaderNames.DeliverAt, opts.deliverAt.toISOString());
  }
  const header = hdrs !== undefined ? hdrs.encode() : undefined;
  const size = (header?.length ?? 0) + payload.length;
  if (typeof maxPayload === 'number' && size > maxPayload) {
    const cls = ERROR_CLASSES['max_payload'];
    const msg = `message of ${size} bytes exceeds max_payload ${maxPayload}`;
    throw cls !== undefined ? new cls(msg) : new InvalidArgumentError(msg);
  }
  return encodePub({ subject, reply: opts.reply, header, payload, crc: crc ? true : undefined });
}
