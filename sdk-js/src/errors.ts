// Errors: the generated table classes (errors_gen.ts) plus the few
// client-side conditions that never travel on the wire. Callers switch on
// `err.code` or `instanceof`, never on the message text.
import { FibrilError } from './error_base.js';
import { ERROR_CLASSES, ERROR_TABLE } from './errors_gen.js';

export { FibrilError, type ErrorSpec } from './error_base.js';
export * from './errors_gen.js';

/** ClientErrorCodes are the codes the SDK itself produces (never sent by a server). */
export const ClientErrorCodes = {
  /** The connection was closed (by close() or for good after a fatal error). */
  ConnectionClosed: 'connection_closed',
  /** The connection dropped while the request was outstanding; its fate is unknown. */
  Disconnected: 'disconnected',
  /** No answer arrived in time. */
  Timeout: 'timeout',
  /** The server sent bytes the SDK cannot parse. */
  ProtocolViolation: 'client_protocol_violation',
  /** A delivery's checksum did not match its bytes (detected by this SDK). */
  DeliveryCorrupt: 'delivery_corrupt',
  /** ack/nack/reject/inProgress on a message that has no ack handle. */
  NotDurable: 'not_durable',
  /** A caller-supplied argument is invalid (bad subject, size, option). */
  InvalidArgument: 'invalid_argument',
  /** No server of the list could be reached. */
  NoServers: 'no_servers',
  /** The server answered, but it does not speak Fibril (a plain NATS server, say). */
  NotFibril: 'not_fibril',
} as const;

/** ConnectionClosedError: the connection is closed; nothing more can be sent on it. */
export class ConnectionClosedError extends FibrilError {
  /** Creates the error. */
  constructor(message = 'connection closed', options: { cause?: unknown } = {}) {
    super(ClientErrorCodes.ConnectionClosed, message, { cause: options.cause, retriable: false });
  }
}

/**
 * DisconnectedError: the connection dropped while the request was
 * outstanding. The server may or may not have applied it; retrying is safe
 * for idempotent operations (acks of the same handle, publishes with msgId).
 */
export class DisconnectedError extends FibrilError {
  /** Creates the error. */
  constructor(message = 'connection lost before the answer arrived', options: { cause?: unknown } = {}) {
    super(ClientErrorCodes.Disconnected, message, { cause: options.cause, retriable: true });
  }
}

/** TimeoutError: no answer arrived within the allowed time. */
export class TimeoutError extends FibrilError {
  /** Creates the error. */
  constructor(message = 'timed out', options: { cause?: unknown } = {}) {
    super(ClientErrorCodes.Timeout, message, { cause: options.cause, retriable: true });
  }
}

/**
 * NotFibrilError: the server is reachable but does not speak Fibril (its
 * INFO has no "fibril": a plain NATS server, say). Retrying cannot help:
 * connect rejects with it at once, and a reconnect that meets it gives up.
 */
export class NotFibrilError extends FibrilError {
  /** Creates the error. */
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(ClientErrorCodes.NotFibril, message, { cause: options.cause, retriable: false, fatal: true });
  }
}

/** ProtocolViolationError: the peer sent bytes that break the wire contract. */
export class ProtocolViolationError extends FibrilError {
  /** Creates the error. */
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(ClientErrorCodes.ProtocolViolation, message, { cause: options.cause, retriable: true, fatal: true });
  }
}

/**
 * DeliveryCorruptError: a delivery's bytes do not match the checksum the
 * server sent. The SDK has already nacked the delivery so it is redelivered.
 */
export class DeliveryCorruptError extends FibrilError {
  /** handle is the ack handle of the corrupt delivery ("" for plain messages). */
  readonly handle: string;
  /** Creates the error. */
  constructor(message: string, handle: string, options: { cause?: unknown } = {}) {
    super(ClientErrorCodes.DeliveryCorrupt, message, { cause: options.cause, retriable: true });
    this.handle = handle;
  }
}

/** NotDurableError: the message has no ack handle (it came from a plain subscription). */
export class NotDurableError extends FibrilError {
  /** Creates the error. */
  constructor(message = 'message has no ack handle (plain subscription)') {
    super(ClientErrorCodes.NotDurable, message, { retriable: false });
  }
}

/** InvalidArgumentError: a caller-supplied argument is invalid. */
export class InvalidArgumentError extends FibrilError {
  /** Creates the error. */
  constructor(message: string) {
    super(ClientErrorCodes.InvalidArgument, message, { retriable: false });
  }
}

/** NoServersError: none of the configured servers could be reached. */
export class NoServersError extends FibrilError {
  /** Creates the error. */
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(ClientErrorCodes.NoServers, message, { cause: options.cause, retriable: true });
  }
}

/**
 * errorFromWire turns the text of a `-ERR` line into a typed error, by the
 * rule of SPEC.md 7.8 (as Go's protocol.ParseErrText): one pair of quotes
 * and surrounding spaces are dropped; a first word that is a table code
 * gives that code's class (Fibril form `<code> <text>[: <detail>]`);
 * otherwise a text starting with a table row's NATS text gives that row's
 * class (a server answers in the NATS form before CONNECT is accepted, e.g.
 * `Authorization Violation`); otherwise a code-like first word gives a
 * FibrilError with that code, and anything else the code "unknown". The
 * context after the table text lands in `detail`.
 */
export function errorFromWire(text: string): FibrilError {
  let t = text.trim();
  if (t.length >= 2 && t.startsWith("'") && t.endsWith("'")) t = t.slice(1, -1);
  const sp = t.indexOf(' ');
  const word = sp < 0 ? t : t.slice(0, sp);
  const rest = sp < 0 ? '' : t.slice(sp + 1);
  const spec = ERROR_TABLE[word];
  if (spec !== undefined) {
    const e = new ERROR_CLASSES[word]!(rest === '' ? spec.text : rest);
    let d = rest.startsWith(spec.text) ? rest.slice(spec.text.length) : rest;
    if (d.startsWith(':')) d = d.slice(1);
    e.detail = d.trim();
    return e;
  }
  const low = t.toLowerCase();
  for (const row of Object.values(ERROR_TABLE)) {
    if (row.natsText !== '' && low.startsWith(row.natsText.toLowerCase())) {
      const e = new ERROR_CLASSES[row.code]!(t);
      e.detail = t.slice(row.natsText.length).trim();
      return e;
    }
  }
  if (/^[a-z0-9_]+$/.test(word)) {
    const e = new FibrilError(word, rest === '' ? word : rest, { retriable: false });
    e.detail = rest;
    return e;
  }
  const e = new FibrilError('unknown', t, { retriable: false });
  e.detail = t;
  return e;
}
