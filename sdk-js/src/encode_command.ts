// encodeCommand: the frame a Command describes, byte for byte as Go's
// protocol.AppendCommand writes it. For tools, tests and the conformance
// vectors; the SDK's hot paths use the specific encoders in encoder.ts.
import { crc32, crcHex } from './crc.js';
import { InvalidArgumentError } from './errors.js';
import { formatHandle } from './handle.js';
import type { Command } from './parser.js';

const CRLF = '\r\n';
const EMPTY = new Uint8Array(0);

function opt(s: string | undefined): string {
  return s === undefined || s === '' ? '' : ' ' + s;
}

function positive(n: number | undefined): string {
  return n !== undefined && n > 0 ? ' ' + String(n) : '';
}

/**
 * encodeCommand returns the wire bytes of c. crc says whether CRC mode is
 * on: PUB/HPUB/MSG/HMSG then carry the computed checksum when c.hasCRC is
 * true and "-" otherwise. Throws InvalidArgumentError when c lacks fields
 * its op needs.
 */
export function encodeCommand(c: Command, crc: boolean): Buffer {
  const line = (s: string) => Buffer.from(s + CRLF);
  switch (c.op) {
    case 'INFO':
    case 'CONNECT':
      return line(`${c.op} ${c.json ?? ''}`);
    case 'PING':
    case 'PONG':
      return line(c.op);
    case '+OK':
      return line(c.text ? `+OK ${c.text}` : '+OK');
    case '-ERR':
      return line(`-ERR '${(c.text ?? '').replace(/'/g, '"').replace(/[\r\n]/g, ' ')}'`);
    case 'PUB':
    case 'HPUB':
    case 'MSG':
    case 'HMSG': {
      const hasHdr = c.op === 'HPUB' || c.op === 'HMSG';
      const header = hasHdr ? (c.header ?? EMPTY) : EMPTY;
      const payload = c.payload ?? EMPTY;
      let s = `${c.op} ${c.subject ?? ''}`;
      if (c.op === 'MSG' || c.op === 'HMSG') s += ' ' + (c.sid ?? '');
      s += opt(c.reply);
      s += hasHdr ? ` ${header.length} ${header.length + payload.length}` : ` ${payload.length}`;
      if (crc) s += c.hasCRC ? ' ' + crcHex(crc32(header, payload)) : ' -';
      return Buffer.concat([Buffer.from(s + CRLF), header, payload, Buffer.from(CRLF)]);
    }
    case 'SUB':
      return line(`SUB ${c.subject ?? ''}${opt(c.group)} ${c.sid ?? ''}${positive(c.max)}`);
    case 'UNSUB':
      return line(`UNSUB ${c.sid ?? ''}${positive(c.max)}`);
    case 'POLL':
      return line(`POLL ${c.subject ?? ''} ${c.group ?? ''} ${c.max ?? 0}${positive(c.millis)}`);
    case 'ACK':
      if (!c.handles || c.handles.length === 0) throw new InvalidArgumentError('ACK needs at least one handle');
      return line('ACK ' + c.handles.map(formatHandle).join(' '));
    case 'NACK':
    case 'REJECT':
    case 'EXTEND':
      if (!c.handles || c.handles.length !== 1) throw new InvalidArgumentError(`${c.op} needs exactly one handle`);
      return line(`${c.op} ${formatHandle(c.handles[0]!)}${c.op === 'REJECT' ? '' : positive(c.millis)}`);
    case 'TOPIC LIST':
      return line('TOPIC LIST');
    case 'TOPIC CREATE':
    case 'TOPIC INFO':
    case 'TOPIC DELETE':
    case 'TOPIC REQUEUE':
    case 'GROUP CREATE':
    case 'GROUP INFO':
    case 'GROUP LIST':
    case 'GROUP DELETE':
      return line(`${c.op} ${c.subject ?? ''}${opt(c.group)}${opt(c.json)}`);
  }
  throw new InvalidArgumentError(`cannot encode ${String((c as Command).op)}`);
}
