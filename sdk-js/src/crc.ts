// CRC-32 (IEEE) as the wire's crc token uses it. Node 20.15+ ships
// zlib.crc32, so the SDK needs no table of its own.
import { crc32 as zcrc32 } from 'node:zlib';

/** crc32 returns the CRC-32 IEEE of the concatenation of parts, unsigned. */
export function crc32(...parts: Uint8Array[]): number {
  let c = 0;
  for (const p of parts) c = zcrc32(p, c);
  return c >>> 0;
}

/** crcHex formats a checksum as the wire's 8 lowercase hex digits. */
export function crcHex(c: number): string {
  return (c >>> 0).toString(16).padStart(8, '0');
}
