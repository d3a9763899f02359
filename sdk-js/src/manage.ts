// Topic and group management (SPEC.md "Management"): each call sends one
// `TOPIC ...` or `GROUP ...` line and resolves with the JSON of the +OK.
import { encodeManage } from './encoder.js';
import { ProtocolViolationError } from './errors.js';

/** ManageRequest sends a command and resolves with the +OK argument. */
export type ManageRequest = (bytes: Buffer, signal?: AbortSignal) => Promise<string>;

/** TopicConfig configures a topic (fields as in SPEC.md; unknown fields pass through). */
export interface TopicConfig {
  subjects?: string[];
  partitions?: number;
  durability?: 'sync' | 'group' | 'none';
  retention?: 'workqueue' | 'limits';
  max_age_ms?: number;
  max_bytes?: number;
  max_msgs?: number;
  max_unsettled_msgs?: number;
  max_unsettled_bytes?: number;
  full_policy?: 'block' | 'reject';
  /**
   * compression is the codec of the topic's sealed segments on disk
   * (default 'none'). Fixed at creation; messages read back the same.
   */
  compression?: 'none' | 's2' | 'zstd';
  [k: string]: unknown;
}

/** GroupConfig configures a consumer group (fields as in SPEC.md). */
export interface GroupConfig {
  start?: 'earliest' | 'new';
  lease_ms?: number;
  max_deliveries?: number;
  dead_letter?: string;
  [k: string]: unknown;
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

/** Topics manages durable topics. Methods reject with the server's typed error. */
export class Topics {
  #req: ManageRequest;
  /** Creates the API over a request function; use Connection.topics. */
  constructor(req: ManageRequest) {
    this.#req = req;
  }
  /** create creates topic name with config; resolves with its info. */
  async create(name: string, config?: TopicConfig, opts: ManageOptions = {}): Promise<Info> {
    return json(await this.#req(encodeManage('TOPIC', 'CREATE', [name], config), opts.signal)) as Info;
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
}

/** Groups manages consumer groups. Methods reject with the server's typed error. */
export class Groups {
  #req: ManageRequest;
  /** Creates the API over a request function; use Connection.groups. */
  constructor(req: ManageRequest) {
    this.#req = req;
  }
  /** create creates group on topic with config; resolves with its info. */
  async create(topic: string, group: string, config?: GroupConfig, opts: ManageOptions = {}): Promise<Info> {
    return json(await this.#req(encodeManage('GROUP', 'CREATE', [topic, group], config), opts.signal)) as Info;
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
