// Ack handles (SPEC.md 9.1): the reply-to of a durable delivery,
//   $F.<topic-id>.<group-id>.<partition>.<seq>.<attempt>
// canonical decimals; ids and seq are 64-bit, so they are bigints here.

/** Handle is a parsed ack handle. */
export interface Handle {
  /** topicId is the server-assigned topic id, 1..2^64-1. */
  readonly topicId: bigint;
  /** groupId is the server-assigned group id, 1..2^64-1. */
  readonly groupId: bigint;
  /** partition is the partition index, 0..2^32-1. */
  readonly partition: number;
  /** seq is the message's sequence in its partition, 1..2^64-1. */
  readonly seq: bigint;
  /** attempt is the delivery count of this delivery (1 = first), 1..2^32-1. */
  readonly attempt: number;
}

/** HandlePrefix starts every ack handle subject. */
export const HandlePrefix = '$F.';

const HANDLE_RE = /^\$F\.([1-9][0-9]{0,19})\.([1-9][0-9]{0,19})\.(0|[1-9][0-9]{0,9})\.([1-9][0-9]{0,19})\.([1-9][0-9]{0,9})$/;
const U64 = 2n ** 64n - 1n;
const U32 = 2 ** 32 - 1;

/**
 * parseHandle parses an ack handle, or returns undefined when s is not a
 * canonical handle with every field in range (a plain reply subject, say).
 */
export function parseHandle(s: string): Handle | undefined {
  const m = HANDLE_RE.exec(s);
  if (m === null) return undefined;
  const topicId = BigInt(m[1]!);
  const groupId = BigInt(m[2]!);
  const partition = Number(m[3]!);
  const seq = BigInt(m[4]!);
  const attempt = Number(m[5]!);
  if (topicId > U64 || groupId > U64 || seq > U64 || partition > U32 || attempt > U32) return undefined;
  return { topicId, groupId, partition, seq, attempt };
}

/** formatHandle is the inverse of parseHandle. */
export function formatHandle(h: Handle): string {
  return `${HandlePrefix}${h.topicId}.${h.groupId}.${h.partition}.${h.seq}.${h.attempt}`;
}

/** AckKind is what a settle body published to a handle subject asks for (SPEC.md 9.3). */
export type AckKind = 'ack' | 'nak' | 'progress' | 'term';

/** AckBodies are the bodies that settle a delivery when published to its handle. */
export const AckBodies = { ack: '+ACK', nak: '-NAK', progress: '+WPI', term: '+TERM' } as const;

function trimBody(s: string): string {
  return s.replace(/^[ \t]+/, '').replace(/[ \t\r\n]+$/, '');
}

/**
 * parseAckBody parses the payload of a PUB to a handle subject, as Go's
 * protocol.ParseAckBody: empty or "+ACK", "-NAK" (optionally
 * `{"delay":<ns>}`), "+WPI", "+TERM [reason]". Returns undefined for any
 * other body (the server answers invalid_ack).
 */
export function parseAckBody(payload: string): { kind: AckKind; delayNs: bigint } | undefined {
  const p = trimBody(payload);
  if (p === '' || p === '+ACK') return { kind: 'ack', delayNs: 0n };
  if (p === '+WPI') return { kind: 'progress', delayNs: 0n };
  if (p === '+TERM' || p.startsWith('+TERM ')) return { kind: 'term', delayNs: 0n };
  if (p === '-NAK') return { kind: 'nak', delayNs: 0n };
  if (p.startsWith('-NAK ')) {
    const m = /^\{[ \t]*"delay"[ \t]*:[ \t]*([0-9]+)[ \t]*\}$/.exec(trimBody(p.slice(5)));
    if (m === null) return undefined;
    const d = BigInt(m[1]!);
    if (d > 2n ** 63n - 1n) return undefined;
    return { kind: 'nak', delayNs: d };
  }
  return undefined;
}
