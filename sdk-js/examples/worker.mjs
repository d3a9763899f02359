#!/usr/bin/env node
// A Fibril worker: processes jobs with concurrency N, acks, nacks with backoff.
//
//   node examples/worker.mjs --url nats://127.0.0.1:4222 --topic jobs --group workers -n 8
//
// Each job body is text. The demo handler understands three kinds of job:
//   sleep:<ms>  works that long, then succeeds;
//   fail:<k>    fails on its first k deliveries, then succeeds;
//   anything else succeeds at once.
// A failed job is nacked with exponential backoff (--backoff ms × 2^(delivery-1),
// capped by --max-backoff); after the group's max_deliveries the server
// dead-letters it.
//
// On SIGTERM (or SIGINT) the worker stops taking new jobs, hands buffered
// ones back to the server, lets the jobs in progress finish and settle (up
// to --grace ms), closes the connection and exits 0.
//
// It prints one line per event on stdout: ready, start <job>,
// done <job> attempt=<n>, retry <job> attempt=<n> delay=<ms>, corrupt, stopped.
// --max-in-flight sets how many jobs it holds at once (default 2n).
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect, DeliveryCorruptError } from '../dist/index.js';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.FIBRIL_URL ?? 'nats://127.0.0.1:4222' },
    topic: { type: 'string', default: 'jobs' },
    group: { type: 'string', default: 'workers' },
    concurrency: { type: 'string', short: 'n', default: '8' },
    'max-in-flight': { type: 'string', default: '0' },
    backoff: { type: 'string', default: '100' },
    'max-backoff': { type: 'string', default: '30000' },
    grace: { type: 'string', default: '30000' },
  },
});
const concurrency = Number(args.concurrency);
const credit = Number(args['max-in-flight']);
const base = Number(args.backoff);
const cap = Number(args['max-backoff']);
const grace = Number(args.grace);

const log = (...parts) => process.stdout.write(parts.join(' ') + '\n');

/** process is the demo job handler; it throws to make the job fail. */
async function processJob(body, attempt) {
  const [kind, arg] = body.split(':', 2);
  if (kind === 'sleep') await sleep(Number(arg));
  else if (kind === 'fail' && attempt <= Number(arg)) throw new Error(`job ${body} failed on attempt ${attempt}`);
}

/** backoff is the redelivery delay (ms) after failed delivery number attempt. */
const backoff = (attempt) => Math.min(cap, base * 2 ** (attempt - 1));

const stop = new AbortController();
for (const sig of ['SIGTERM', 'SIGINT']) process.once(sig, () => stop.abort());

const nc = await connect({ servers: args.url, name: 'example-worker' });
// Credit of twice the concurrency keeps every worker busy without hoarding
// jobs other workers could take. Aborting the signal closes the subscription:
// run hands the buffered jobs back at once and lets the running ones finish.
const sub = nc.consume(args.topic, args.group, { maxInFlight: credit || 2 * concurrency, signal: stop.signal });
await sub.ready;
const running = sub.run(
  async (m) => {
    const body = m.string();
    log('start', body);
    try {
      await processJob(body, m.deliveryCount);
    } catch {
      const delayMs = backoff(m.deliveryCount);
      log('retry', body, `attempt=${m.deliveryCount}`, `delay=${delayMs}`);
      await m.nack({ delayMs });
      return;
    }
    log('done', body, `attempt=${m.deliveryCount}`); // returning acks it (batched)
  },
  { concurrency, onError: (e) => log(e instanceof DeliveryCorruptError ? 'corrupt' : 'error', e.code ?? String(e)) },
);
log('ready');
// Jobs in progress get --grace ms to finish; then the connection closes and
// the server hands what is still unsettled to another worker.
await new Promise((r) => stop.signal.addEventListener('abort', r, { once: true }));
const graceTimer = sleep(grace, 'grace over', { ref: false });
const outcome = await Promise.race([running.then(() => 'done', (e) => `worker failed: ${e}`), graceTimer]);
if (outcome !== 'done') log(outcome);
await nc.close();
log('stopped');
process.exit(0);
