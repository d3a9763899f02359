/**
 * FibrilError is the base class of every error the SDK produces. Callers
 * switch on `code` (a stable snake_case string from SPEC.md's error table, or
 * one of the client-side codes in errors.ts), never on `message`.
 */
export class FibrilError extends Error {
  /** code is the stable machine-readable error code, e.g. "crc_mismatch". */
  readonly code: string;
  /** retriable says whether trying the same operation again can succeed. */
  readonly retriable: boolean;
  /** fatal says whether the server closes the connection after this error. */
  readonly fatal: boolean;
  /**
   * detail is the optional context a server put after the table text of an
   * `-ERR` ("got 00000000, computed 3610a686"); "" when none. For people.
   */
  detail = '';

  /**
   * Creates an error with the given code. `options.cause` is kept as the
   * standard `cause` property.
   */
  constructor(
    code: string,
    message: string,
    options: { cause?: unknown; retriable?: boolean; fatal?: boolean } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retriable = options.retriable ?? false;
    this.fatal = options.fatal ?? false;
  }
}

/** ErrorSpec is one row of the spec's error table (protocol/errors.json). */
export interface ErrorSpec {
  /** code is the stable snake_case code. */
  readonly code: string;
  /** natsText is the text sent to clients that did not opt into fibril mode. */
  readonly natsText: string;
  /** text is the human text after the code in a fibril `-ERR`. */
  readonly text: string;
  /** fatal says whether the server closes the connection after sending it. */
  readonly fatal: boolean;
  /** retriable says whether a retry of the same operation can help. */
  readonly retriable: boolean;
  /** description explains when the error happens. */
  readonly description: string;
}
