// The generated error classes must match protocol/errors.json.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { generate, defaultInput, output } from '../scripts/gen-errors.mjs';

test('src/errors_gen.ts is generated from protocol/errors.json and up to date', () => {
  assert.ok(existsSync(defaultInput), `${defaultInput} is missing`);
  const want = generate(readFileSync(defaultInput, 'utf8'));
  const have = readFileSync(output, 'utf8');
  assert.ok(have === want, 'src/errors_gen.ts is stale: run `npm run gen` in sdk-js');
});

test('generator refuses malformed tables', () => {
  assert.throws(() => generate('{"nope": 1}'));
  assert.throws(() => generate('[{"code": "Bad Code"}]'));
  const src = generate('[{"code":"x_y","text":"t","fatal":true,"retriable":false,"description":"d"}]');
  assert.match(src, /export class XYError extends FibrilError/);
  assert.match(src, /retriable: false, fatal: true/);
});
