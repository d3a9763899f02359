// The fenced code blocks of README.md, for test/readme.test.mjs (which runs
// every one of them) and bench/readme.mjs (which runs the quickstart's
// consume loop). A js block names its file on its first line
// (`// consume.mjs`); a `text` block right after a block is its expected
// output. It only reads text: it never runs anything.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const readme = join(dirname(fileURLToPath(import.meta.url)), '..', 'README.md');

/** blocks returns [{ lang, code, file, output, line }] for every non-text block. */
export function blocks(path = readme) {
  const src = readFileSync(path, 'utf8');
  const re = /^```([a-z]*)\n([\s\S]*?)^```\n/gm;
  const found = [];
  for (let m; (m = re.exec(src)) !== null; ) found.push({ lang: m[1], code: m[2], start: m.index, end: re.lastIndex });
  const out = [];
  found.forEach((b, i) => {
    if (b.lang === 'text') return;
    const next = found[i + 1];
    const output = next?.lang === 'text' && !src.slice(b.end, next.start).includes('```') ? next.code : undefined;
    const file = /^\/\/ ([\w.-]+\.mjs)\n/.exec(b.code)?.[1];
    out.push({ lang: b.lang, code: b.code, file, output, line: src.slice(0, b.start).split('\n').length });
  });
  return out;
}
