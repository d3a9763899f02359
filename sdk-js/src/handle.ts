// Ack handles: the reply-to of a durable delivery,
//   $F.<topic-id>.<group-id>.<partition>.<seq>.<attempt>
// (decimal numbers; attempt is the delivery count, starting at 1).

/** Handle is a parsed ack handle. */
export interface Handle {
  /** topicId is the server-assigned topic id. */
  readonly topicId: number;
  /** groupId is the server-assigned group id. */
  readonly groupId: number;
  /** partition is the partition index. */
  readonly partition: number;
  /** seq is the message's sequence in its partition. */
  readonly seq: number;
  /** attempt is the delivery count of this delivery (1 = first delivery). */
  readonly attempt: number;
}

const HANDLE_RE = /^\$F\.([1-9][0-9]*)\.([1-9][0-9]*)\.(0|[1-9][0-9]*)\.([1-9][0-9]*)\.([1-9][0-9]*)$/;
const U32 = 2 ** 32 - 1;

/**
 * parseHandle parses an ack handle (canonical decimals; topic, group, seq and
 * attempt at least 1; partition and attempt at most 2^32-1), or returns
 * undefined when s is not one. Ids and seq above Number.MAX_SAFE_INTEGER are
 * refused too (the raw handle string still settles the message).
 */
export function parseHandle(s: string): Handle | undefined {
  const m = HANDLE_RE.exec(s);
  if (m === null) return undefined;
  const n = m.slice(1).map(Number);
  if (n.some((x) => !Number.isSafeInteger(x)) || n[2]! > U32 || n[4]! > U32) return undefined;
  return { topicId: n[0]!, groupId: n[1]!, partition: n[2]!, seq: n[3]!, attempt: n[4]! };
}

/** formatHandle is the inverse of parseHandle. */
export function formatHandle(h: Handle): string {
  return `$F.${h.topicId}.${h.groupId}.${h.partition}.${h.seq}.${h.attempt}`;
}
