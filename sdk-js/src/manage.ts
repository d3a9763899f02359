// Topic and group management (SPEC.md "Management"): each call sends one
// `TOPIC ...` or `GROUP ...` line and resolves with the JSON of the +OK.
import { encodeManage } from './encoder.js';
import { GroupExistsError, ProtocolViolationError, TopicExistsError } from './errors.js';

/** ManageRequest sends a command and resolves with the +OK argument. */
export type ManageRequest = (bytes: Buffer, signal?: AbortSignal) => Promise<string>;

/**
 * TopicConfig configures a topic: the SPEC.md 10.1 settings, in camelCase
 * with durations in ms (maxAgeMs). The snake_case wire names of earlier
 * releases (max_age_ms, ...) still work (deprecated); unknown fields pass
 * through as they are.
 */
export interface TopicConfig {
  subjects?: string[];
  partitions?: number;
  /** replicas: nodes holding each partition in a cluster; leave it out for every node (3 or 5; 1 on a single node). */
  replicas?: number;
  durability?: 'sync' | 'group' | 'none';
  retention?: 'workqueue' | 'limits';
  maxAgeMs?: number;
  maxBytes?: number;
  maxMsgs?: number;
  maxUnsettledMsgs?: number;
  maxUnsettledBytes?: number;
  fullPolicy?: 'block' | 'reject';
  /**
   * compression is the codec of the topic's sealed segments on disk
   * (default 'none'). Fixed at creation; messages read back the same.
   */
  compression?: 'none' | 's2' | 'zstd';
  /**
   * duplicateWindowMs is how long a publish's msgId is remembered (default
   * 120000; 0 turns de-duplication off): a repeat within it is not stored
   * again, and its Position says duplicate.
   */
  duplicateWindowMs?: number;
  /** duplicateMaxIds bounds the ids a partition remembers (default 100000); past it the oldest goes first. */
  duplicateMaxIds?: number;
  /** messageTtlMs is how long a message without its own TTL stays deliverable (default forever). */
  messageTtlMs?: number;
  /** allowMsgTtl lets publishes set their own TTL (ttlMs, the Nats-TTL header). */
  allowMsgTtl?: boolean;
  /** allowMsgDelay lets publishes hold a message back (delayMs, deliverAt). */
  allowMsgDelay?: boolean;
  /** @deprecated use maxAgeMs */
  max_age_ms?: number;
  /** @deprecated use maxBytes */
  max_bytes?: number;
  /** @deprecated use maxMsgs */
  max_msgs?: number;
  /** @deprecated use maxUnsettledMsgs */
  max_unsettled_msgs?: number;
  /** @deprecated use maxUnsettledBytes */
  max_unsettled_bytes?: number;
  /** @deprecated use fullPolicy */
  full_policy?: 'block' | 'reject';
  [k: string]: unknown;
}

/**
 * GroupConfig configures a consumer group (SPEC.md 10.2), camelCase with
 * durations in ms; the snake_case names of earlier releases still work
 * (deprecated).
 */
export interface GroupConfig {
  /** Where a new group starts: earliest (default), new, seq (at startSeq) or time (at startTime). */
  start?: 'earliest' | 'new' | 'seq' | 'time';
  /** With start 'seq': the offset where the group starts in every partition (1 or more). */
  startSeq?: number;
  /** With start 'time': an RFC 3339 time; the group starts at the first message stored at or after it. */
  startTime?: string;
  /** Redelivery delays in ms after a NACK without a delay or an expired lease, by delivery count (the last repeats; at most 32). */
  backoffMs?: number[];
  /** Subject filters (wildcards allowed): the group receives only matching messages (at most 64). */
  filter?: string[];
  /**
   * 'partition': one message out at a time per partition, in offset order (the next only once the one before is settled);
   * 'key': the same per Fibril-Key (publish option key), keys in parallel, messages without a key unordered;
   * 'none' (default): in parallel.
   */
  ordered?: 'none' | 'partition' | 'key';
  /** What the group does with a message whose TTL ran out before delivery: 'drop' (default) or 'dead_letter'. */
  onExpiry?: 'drop' | 'dead_letter';
  leaseMs?: number;
  maxDeliveries?: number;
  deadLetter?: string;
  natsAck?: 'auto' | 'explicit';
  /** @deprecated use leaseMs */
  lease_ms?: number;
  /** @deprecated use maxDeliveries */
  max_deliveries?: number;
  /** @deprecated use deadLetter */
  dead_letter?: string;
  [k: string]: unknown;
}

// The wire (SPEC.md 10) spells settings in snake_case: camelCase keys are
// renamed, everything else goes as it is.
function wire(config: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (config === undefined) return undefined;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(config)) {
    if (v === undefined) continue;
    out[k.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase())] = v;
  }
  return out;
}

/** Info is the JSON object a management command answers with. */
export type Info = Record<string, unknown>;

function json(arg: string): unknown {
  const t = arg.trim();
  if (t === '') return undefined;
  try {
    return JSON.parse(t);
  } catch (e) {
    throw new ProtocolViolationError(`management answer is not JSON: ${JSON.stringify(t.slice(0, 80))}`, { cause: e });
  }
}

/** ManageOptions are accepted by every management call. */
export interface ManageOptions {
  /** signal abandons waiting for the answer. */
  signal?: AbortSignal;
}

/** CreateOptions are accepted by topics.create and groups.create. */
export interface CreateOptions extends ManageOptions {
  /**
   * existOk: when it exists with another configuration, resolve with its
   * info instead of rejecting with TopicExistsError / GroupExistsError.
   */
  existOk?: boolean;
}

/** Topics manages durable topics. Methods reject with the server's typed error. */
export class Topics {
  #req: ManageRequest;
  /** Creates the API over a request function; use Connection.topics. */
  constructor(req: ManageRequest) {
    this.#req = req;
  }
  /** create creates topic name with config; resolves with its info (creating it again alike is fine). */
  async create(name: string, config?: TopicConfig, opts: CreateOptions = {}): Promise<Info> {
    try {
      return json(await this.#req(encodeManage('TOPIC', 'CREATE', [name], wire(config)), opts.signal)) as Info;
    } catch (e) {
      if (opts.existOk && e instanceof TopicExistsError) return this.info(name, opts);
      throw e;
    }
  }
  /** info returns the topic's configuration and state. */
  async info(name: string, opts: ManageOptions = {}): Promise<Info> {
    return json(await this.#req(encodeManage('TOPIC', 'INFO', [name]), opts.signal)) as Info;
  }
  /** list returns what TOPIC LIST answers (the topics). */
  async list(opts: ManageOptions = {}): Promise<unknown> {
    return json(await this.#req(encodeManage('TOPIC', 'LIST', []), opts.signal));
  }
  /** delete removes the topic and its data. */
  async delete(name: string, opts: ManageOptions = {}): Promise<unknown> {
    return json(await this.#req(encodeManage('TOPIC', 'DELETE', [name]), opts.signal));
  }
  /**
   * requeue moves dead letters of topic name back to the topics that capture
   * their original subjects (TOPIC REQUEUE, SPEC.md 10): at most max (default
   * 1000), those whose original subject matches one of filter, at offsets
   * fromSeq..toSeq. Resolves with `{ topic, requeued, error? }`; error says
   * why it stopped at a message it could not move (that one stays).
   */
  async requeue(name: string, select: RequeueOptions = {}, opts: ManageOptions = {}): Promise<Requeued> {
    const sel = wire(select as Record<string, unknown>);
    const arg = sel && Object.keys(sel).length > 0 ? sel : undefined;
    return json(await this.#req(encodeManage('TOPIC', 'REQUEUE', [name], arg), opts.signal)) as Requeued;
  }
}

/** RequeueOptions pick the dead letters topics.requeue moves. */
export interface RequeueOptions {
  /** The most messages moved (default 1000, at most 100000). */
  max?: number;
  /** Subject filters on the original subject (none: any). */
  filter?: string[];
  /** The lowest and highest offsets, in every partition. */
  fromSeq?: number;
  toSeq?: number;
  /** A topic to publish them to (default: the one capturing each original subject now). */
  to?: string;
}

/** Requeued is what topics.requeue resolves with. */
export interface Requeued {
  topic: string;
  requeued: number;
  error?: string;
}

/** Groups manages consumer groups. Methods reject with the server's typed error. */
export class Groups {
  #req: ManageRequest;
  /** Creates the API over a request function; use Connection.groups. */
  constructor(req: ManageRequest) {
    this.#req = req;
  }
  /** create creates group on topic with config; resolves with its info (creating it again alike is fine). */
  async create(topic: string, group: string, config?: GroupConfig, opts: CreateOptions = {}): Promise<Info> {
    try {
      return json(await this.#req(encodeManage('GROUP', 'CREATE', [topic, group], wire(config)), opts.signal)) as Info;
    } catch (e) {
      if (opts.existOk && e instanceof GroupExistsError) return this.info(topic, group, opts);
      throw e;
    }
  }
  /** info returns the group's configuration and state. */
  async info(topic: string, group: string, opts: ManageOptions = {}): Promise<Info> {
    return json(await this.#req(encodeManage('GROUP', 'INFO', [topic, group]), opts.signal)) as Info;
  }
  /** list returns what GROUP LIST answers (the topic's groups). */
  async list(topic: string, opts: ManageOptions = {}): Promise<unknown> {
    return json(await this.#req(encodeManage('GROUP', 'LIST', [topic]), opts.signal));
  }
  /** delete removes the group. */
  async delete(topic: string, group: string, opts: ManageOptions = {}): Promise<unknown> {
    return json(await this.#req(encodeManage('GROUP', 'DELETE', [topic, group]), opts.signal));
  }
}
