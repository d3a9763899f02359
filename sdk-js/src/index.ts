/**
 * @fibrilmq/fibril — the Node.js client for Fibril.
 *
 * ```js
 * import { connect } from '@fibrilmq/fibril';
 * await using nc = await connect({ servers: '127.0.0.1:4222' });
 * const pos = await nc.publish('orders', 'hello', { key: 'customer-7' });
 * for await (const m of nc.consume('orders', 'billing', { maxInFlight: 16 })) {
 *   m.ack(); // batched with its burst; `await m.ack()` waits until it is durable
 * }
 * ```
 *
 * Owns: the wire codec (parser, encoders, headers, handles), the connection
 * with its request FIFO, publish window, reconnect and failover across
 * servers (servers.ts). Never: retries a settle on its own, matches errors
 * by message text, or depends on any package at run time.
 */
export { connect, Connection, parsePosition } from './connection.js';
export type { ConsumeOptions, FetchOptions, Position, PublishOptions } from './connection.js';
export type { ConnectOptions, ReconnectOptions } from './options.js';
export { backoff, parseServer } from './options.js';
export { Msg } from './message.js';
export type { SettleOptions } from './message.js';
export { Subscription } from './subscription.js';
export type { RunOptions } from './subscription.js';
export { Topics, Groups } from './manage.js';
export type { TopicConfig, GroupConfig, Info, CreateOptions, ManageOptions, RequeueOptions, Requeued } from './manage.js';
export { MsgHeaders, HeaderNames } from './headers.js';
export { parseHandle, formatHandle, parseAckBody, AckBodies, HandlePrefix } from './handle.js';
export type { Handle, AckKind } from './handle.js';
export {
  Parser, Direction, DefaultLimits, MaxCount, MaxMillis, MaxGroupName,
  parseError, checkSubject, validGroupName, validToken,
} from './parser.js';
export type { Command, Op, Limits, ParseFailure, ParseHandler, DirectionName } from './parser.js';
export * from './encoder.js';
export { encodeCommand } from './encode_command.js';
export { crc32, crcHex } from './crc.js';
export { VERSION } from './link.js';
export type { ServerInfo } from './link.js';
export * from './errors.js';
