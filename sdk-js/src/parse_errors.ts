// Codes of the parser's fatal errors. They are codes of SPEC.md's error
// table, so a server can send them as -ERR unchanged.

/** ParseErrorCodes are the codes a ParseError can carry. */
export const ParseErrorCodes = {
  UnknownOp: 'unknown_op',
  MaxControlLine: 'max_control_line',
  MaxPayload: 'max_payload',
  InvalidSubject: 'invalid_subject',
  BadArgs: 'bad_args',
  BadNumber: 'bad_number',
  BadCRC: 'bad_crc',
  BadJSON: 'bad_json',
  BadHeaderSize: 'bad_header_size',
  MissingCRLF: 'missing_crlf',
  ParserFailed: 'parser_failed',
} as const;
