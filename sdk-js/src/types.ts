// The option and result types of Connection's calls, and the publish
// confirm parser (SPEC.md 7.5).
import type { MsgHeaders } from './headers.js';

/** Position is where a durable topic stored a published message. */
export interface Position {
  /** partition is the partition index. */
  partition: number;
  /** seq is the sequence number within the partition (64-bit, so a bigint). */
  seq: bigint;
  /**
   * duplicate is true when the publish's msgId was stored within the topic's
   * duplicate window: it was not stored again, and partition and seq are the
   * first one's ("+OK <partition>:<seq> duplicate").
   */
  duplicate: boolean;
}

/** PublishOptions are the optional parts of a publish. */
export interface PublishOptions {
  /** key is the partition key (sent as the Fibril-Key header). */
  key?: string;
  /** headers are extra headers. */
  headers?: MsgHeaders | Record<string, string | string[]>;
  /**
   * msgId identifies the message for de-duplication (Nats-Msg-Id header): the
   * topic stores it once within its duplicate window, and confirms a repeat
   * with the first one's Position, duplicate set.
   */
  msgId?: string;
  /**
   * ttlMs is the message's time to live in ms (Nats-TTL header, on a topic
   * created with allowMsgTtl): past it a group drops it or dead-letters it
   * (the group's onExpiry).
   */
  ttlMs?: number;
  /**
   * delayMs holds the message back from every group this long after it is
   * stored (Fibril-Delay header, on a topic created with allowMsgDelay).
   */
  delayMs?: number;
  /** deliverAt holds the message back until this time (Fibril-Deliver-At header). */
  deliverAt?: Date;
  /** reply is a reply-to subject for plain request/reply. */
  reply?: string;
  /** signal stops waiting: before sending, the publish is dropped; after, only the wait ends. */
  signal?: AbortSignal;
}

/** ConsumeOptions tune a push consumer. */
export interface ConsumeOptions {
  /** maxInFlight bounds unsettled deliveries to this consumer (default: the server's max_inflight). */
  maxInFlight?: number;
  /** signal ends the consumer (unsubscribes) when aborted. */
  signal?: AbortSignal;
}

/** FetchOptions tune a pull. */
export interface FetchOptions {
  /** max is the most messages returned (default 1). */
  max?: number;
  /** waitMs is how long the server waits for the first message (default 0). */
  waitMs?: number;
  /** @deprecated wait is the old name of waitMs. */
  wait?: number;
  /** signal stops waiting; messages that still arrive are nacked. */
  signal?: AbortSignal;
}

/**
 * parsePosition parses a publish confirm argument: "<partition>:<seq>", the
 * same followed by " duplicate", or "-" (null); undefined if malformed.
 */
export function parsePosition(arg: string): Position | null | undefined {
  const t = arg.trim();
  if (t === '-') return null;
  const m = /^(0|[1-9][0-9]{0,9}):([0-9]{1,20})( +duplicate)?$/.exec(t);
  if (m === null) return undefined;
  const partition = Number(m[1]);
  const seq = BigInt(m[2]!);
  if (partition > 2 ** 32 - 1 || seq > 2n ** 64n - 1n) return undefined;
  return { partition, seq, duplicate: m[3] !== undefined };
}
