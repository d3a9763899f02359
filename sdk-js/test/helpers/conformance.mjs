// The JS runner of the language-neutral conformance scenarios
// (conformance/README.md): an interpreter of scenario steps that drives
// client connections with this SDK and raw connections with a plain socket.
import net from 'node:net';
import { connect } from '../../dist/index.js';

const STEP_MS = 10000;

/** expandAll replaces ${name} in every string of v (deeply) with vars[name]; unknown names stay. */
function expandAll(v, vars) {
  if (typeof v === 'string') return v.replace(/\$\{([A-Za-z0-9_.]+)\}/g, (m, k) => (k in vars ? String(vars[k]) : m));
  if (Array.isArray(v)) return v.map((x) => expandAll(x, vars));
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, expandAll(x, vars)]));
  return v;
}

function fail(msg) {
  throw new Error(msg);
}

function pattern(size) {
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = 97 + (i % 26);
  return b;
}

function sizeOf(spec, vars) {
  if (typeof spec === 'number') return spec;
  const m = /^max_payload(?:([+-])(\d+))?$/.exec(spec);
  if (!m) fail(`bad data_size ${spec}`);
  const base = Number(vars.max_payload);
  return m[1] === '+' ? base + Number(m[2]) : m[1] === '-' ? base - Number(m[2]) : base;
}

function withTimeout(p, ms, what) {
  let timer;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise((_, rej) => {
      timer = setTimeout(() => rej(new Error(`${what}: no result within ${ms} ms`)), ms);
    }),
  ]);
}

/** RawConn is a plain socket with a line reader. */
class RawConn {
  constructor(sock) {
    this.sock = sock;
    this.buf = '';
    this.closed = false;
    this.waiters = [];
    sock.setEncoding('latin1');
    sock.on('data', (d) => {
      this.buf += d;
      this.#wake();
    });
    sock.on('close', () => {
      this.closed = true;
      this.#wake();
    });
    sock.on('error', () => {});
  }
  #wake() {
    for (const w of this.waiters.splice(0)) w();
  }
  async line(ms) {
    const end = Date.now() + ms;
    for (;;) {
      const i = this.buf.indexOf('\n');
      if (i >= 0) {
        let l = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        if (l.endsWith('\r')) l = l.slice(0, -1);
        return l;
      }
      if (this.closed) fail('connection closed while reading a line');
      const left = end - Date.now();
      if (left <= 0) fail('no line within the time limit');
      await new Promise((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }
  write(s) {
    this.sock.write(Buffer.from(s, 'utf8'));
  }
}

/** Pump buffers a subscription's deliveries so steps can wait for or check their absence. */
class Pump {
  constructor(sub) {
    this.sub = sub;
    this.msgs = [];
    this.waiters = [];
    (async () => {
      try {
        for (;;) {
          const r = await sub.next();
          if (r.done) return;
          this.msgs.push(r.value);
          for (const w of this.waiters.splice(0)) w();
        }
      } catch (e) {
        this.error = e;
        for (const w of this.waiters.splice(0)) w();
      }
    })();
  }
  wait() {
    return new Promise((r) => this.waiters.push(r));
  }
}

/**
 * Runner runs one scenario. env: { url, info, restart(): Promise<url> }.
 */
export class Runner {
  constructor(env, scenario) {
    this.env = env;
    this.scenario = scenario;
    this.vars = {
      T: `cf.js-sdk.${scenario.name}.${Math.random().toString(16).slice(2, 10)}`,
      max_payload: env.info.max_payload,
      max_payload_plus1: env.info.max_payload + 1,
    };
    this.conns = new Map();
    this.saved = new Map();
    this.pumps = new Map();
  }

  async run() {
    try {
      for (let i = 0; i < this.scenario.steps.length; i++) {
        const step = expandAll(this.scenario.steps[i], this.vars);
        try {
          await this.#step(step);
        } catch (e) {
          throw new Error(`step ${i + 1} (${step.op}): ${e.message}`, { cause: e });
        }
      }
    } finally {
      await this.close();
    }
  }

  async close() {
    for (const c of this.conns.values()) {
      if (c.raw) c.raw.sock.destroy();
      else await c.nc.close().catch(() => {});
    }
    this.conns.clear();
  }

  client(step) {
    const c = this.conns.get(step.conn ?? 'a');
    if (!c || !c.nc) fail(`no client connection ${step.conn ?? 'a'}`);
    return c.nc;
  }

  raw(step) {
    const c = this.conns.get(step.conn ?? 'a');
    if (!c || !c.raw) fail(`no raw connection ${step.conn ?? 'a'}`);
    return c.raw;
  }

  refs(ref) {
    const m = /^([A-Za-z0-9_]+)(?:\[(\*|-?\d+)\])?$/.exec(ref);
    if (!m) fail(`bad message reference ${ref}`);
    const list = this.saved.get(m[1]);
    if (!list) fail(`no saved messages ${m[1]}`);
    if (m[2] === undefined || m[2] === '*') return list;
    const i = Number(m[2]);
    const x = list.at(i);
    if (!x) fail(`no message ${ref}`);
    return [x];
  }

  async #step(step) {
    const limit = (step.timeout_ms ?? STEP_MS) + (step.wait_ms ?? 0) + (step.op === 'restart_server' ? 50000 : 0);
    let result;
    let err;
    try {
      result = await withTimeout(this.#do(step), limit, step.op);
    } catch (e) {
      err = e;
    }
    if (step.error !== undefined) {
      if (err === undefined) fail(`expected error ${step.error}, got success`);
      if (err.code !== step.error) fail(`expected error ${step.error}, got ${err.code ?? err.message}`);
      return;
    }
    if (err !== undefined) throw err;
    if (step.expect) this.#check(step, result);
  }

  async #do(s) {
    switch (s.op) {
      case 'connect': {
        // A cluster scenario's client is given every node, in node order.
        const nc = await connect({ servers: this.env.servers?.() ?? this.env.url(), crc: s.crc ?? true, reconnect: { initialDelayMs: 50, maxDelayMs: 500 } });
        this.conns.set(s.conn ?? 'a', { nc });
        return undefined;
      }
      case 'close': {
        const c = this.conns.get(s.conn ?? 'a');
        this.conns.delete(s.conn ?? 'a');
        if (c?.raw) c.raw.sock.destroy();
        else if (c?.nc) await c.nc.close();
        return undefined;
      }
      case 'kill_node':
      case 'restart_node': {
        if (!this.env.node) fail(`${s.op}: this runner's server is no cluster`);
        await this.env.node(s.op, s.node ?? 0);
        return undefined;
      }
      case 'restart_server': {
        for (const [k, c] of this.conns) {
          if (c.raw) {
            c.raw.sock.destroy();
            this.conns.delete(k);
          }
        }
        await this.env.restart();
        return undefined;
      }
      case 'topic_create':
        return this.client(s).topics.create(s.topic, s.config);
      case 'topic_info':
        return this.client(s).topics.info(s.topic);
      case 'topic_delete':
        return this.client(s).topics.delete(s.topic);
      case 'topic_list':
        return this.client(s).topics.list();
      case 'topic_requeue': {
        const c = s.config ?? {};
        return this.client(s).topics.requeue(s.topic, { max: c.max, filter: c.filter, fromSeq: c.from_seq, toSeq: c.to_seq });
      }
      case 'group_create':
        return this.client(s).groups.create(s.topic, s.group, s.config);
      case 'group_info':
        return this.client(s).groups.info(s.topic, s.group);
      case 'group_delete':
        return this.client(s).groups.delete(s.topic, s.group);
      case 'group_list':
        return this.client(s).groups.list(s.topic);
      case 'publish': {
        const data = s.data_size !== undefined ? pattern(sizeOf(s.data_size, this.vars)) : (s.data ?? '');
        const pos = await this.client(s).publish(s.subject, data, { headers: s.headers, key: s.key, msgId: s.msg_id });
        if (s.save && pos) {
          this.vars[`${s.save}.partition`] = pos.partition;
          this.vars[`${s.save}.seq`] = String(pos.seq);
        }
        return [pos];
      }
      case 'publish_many': {
        const nc = this.client(s);
        const ps = [];
        for (let i = 0; i < s.count; i++) {
          const key = s.keys ? s.keys[i % s.keys.length] : undefined;
          ps.push(nc.publish(s.subject, `${key ?? s.data ?? 'm'}:${i}`, { key, headers: s.headers }));
        }
        return Promise.all(ps);
      }
      case 'poll': {
        const nc = this.client(s);
        const t0 = Date.now();
        let msgs = await nc.fetch(s.topic, s.group, { max: s.max ?? 1, waitMs: s.wait_ms });
        if (s.total !== undefined) {
          let last = msgs.length;
          while (msgs.length < s.total && last > 0) {
            const more = await nc.fetch(s.topic, s.group, { max: s.max ?? 1, waitMs: s.wait_ms });
            last = more.length;
            msgs = msgs.concat(more);
          }
        }
        const elapsed = Date.now() - t0;
        if (s.save) this.saved.set(s.save, msgs);
        return { msgs, elapsed };
      }
      case 'ack':
      case 'nack':
      case 'reject':
      case 'extend': {
        const verb = { ack: 'ACK', nack: 'NACK', reject: 'REJECT', extend: 'EXTEND' }[s.op];
        const arg = s.op === 'nack' ? s.delay_ms : s.op === 'extend' ? s.ms : undefined;
        if (s.handle !== undefined) return this.client(s).settle(verb, s.handle, arg);
        for (const m of this.refs(s.msg)) {
          if (s.op === 'ack') await m.ack();
          else if (s.op === 'nack') await m.nack({ delay: arg });
          else if (s.op === 'reject') await m.reject();
          else await m.inProgress({ ms: arg });
        }
        return undefined;
      }
      case 'subscribe': {
        const sub = this.client(s).consume(s.topic, s.group, { maxInFlight: s.max_inflight });
        await sub.ready;
        this.pumps.set(s.sub ?? 's', new Pump(sub));
        return undefined;
      }
      case 'unsubscribe': {
        const p = this.pumps.get(s.sub ?? 's');
        if (!p) fail(`no subscription ${s.sub}`);
        p.sub.close();
        return undefined;
      }
      case 'receive':
      case 'receive_all': {
        const pumps = (s.subs ?? [s.sub ?? 's']).map((n) => this.pumps.get(n) ?? fail(`no subscription ${n}`));
        const got = [];
        for (;;) {
          for (const p of pumps) {
            while (p.msgs.length > 0 && got.length < s.count) {
              const m = p.msgs.shift();
              got.push(m);
              if (s.ack) await m.ack();
            }
            if (p.error) throw p.error;
          }
          if (got.length >= s.count) break;
          // Wait only if nothing arrived while acks were awaited above.
          if (pumps.every((p) => p.msgs.length === 0 && !p.error)) await Promise.race(pumps.map((p) => p.wait()));
        }
        if (s.save) this.saved.set(s.save, got);
        return { msgs: got };
      }
      case 'expect_quiet': {
        const pumps = (s.subs ?? [s.sub ?? 's']).map((n) => this.pumps.get(n) ?? fail(`no subscription ${n}`));
        await new Promise((r) => setTimeout(r, s.ms ?? 200));
        const n = pumps.reduce((a, p) => a + p.msgs.length, 0);
        if (n > 0) fail(`${n} deliveries arrived`);
        return undefined;
      }
      case 'raw_connect': {
        const url = new URL(this.env.url());
        const sock = net.connect(Number(url.port), url.hostname);
        const rc = new RawConn(sock);
        this.conns.set(s.conn ?? 'a', { raw: rc });
        const info = await rc.line(STEP_MS);
        if (!info.startsWith('INFO ')) fail(`expected INFO, got ${info}`);
        if (s.connect !== undefined) {
          rc.write(`CONNECT ${JSON.stringify(s.connect)}\r\n`);
        } else if (s.fibril === false) {
          rc.write('CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n');
        } else {
          rc.write(`CONNECT {"verbose":false,"pedantic":false,"headers":true,"fibril":1,"confirm":true,"crc":${s.crc ?? true}}\r\n`);
          const ok = await rc.line(STEP_MS);
          if (ok !== '+OK') fail(`expected +OK to CONNECT, got ${ok}`);
        }
        return undefined;
      }
      case 'raw_send':
        this.raw(s).write(s.text);
        return undefined;
      case 'raw_expect': {
        const rc = this.raw(s);
        const caps = [];
        for (const re of s.lines) {
          let l = await rc.line(STEP_MS);
          while (l === 'PING') {
            rc.write('PONG\r\n');
            l = await rc.line(STEP_MS);
          }
          const m = new RegExp(`^(?:${re})$`).exec(l);
          if (!m) fail(`line ${JSON.stringify(l)} does not match /${re}/`);
          caps.push(...m.slice(1));
        }
        (s.vars ?? []).forEach((name, i) => (this.vars[name] = caps[i]));
        return undefined;
      }
      case 'raw_expect_closed': {
        const rc = this.raw(s);
        while (!rc.closed) {
          rc.buf = '';
          await new Promise((r) => rc.waiters.push(r));
        }
        return undefined;
      }
    }
    fail(`unknown op ${s.op}`);
  }

  #check(s, result) {
    const e = s.expect;
    if (s.op === 'publish' || s.op === 'publish_many') {
      for (const pos of result) {
        if (e.stored !== undefined && (pos !== null) !== e.stored) fail(`stored ${pos !== null}, want ${e.stored}`);
        if (e.partition !== undefined && pos?.partition !== e.partition) fail(`partition ${pos?.partition}, want ${e.partition}`);
        if (e.duplicate !== undefined && pos?.duplicate !== e.duplicate) fail(`duplicate ${pos?.duplicate}, want ${e.duplicate}`);
      }
      return;
    }
    if (['poll', 'receive', 'receive_all'].includes(s.op)) return this.#checkMsgs(e, result);
    // Management answers.
    for (const [path, want] of Object.entries(e.fields ?? {})) {
      const got = path.split('.').reduce((o, k) => (o == null ? undefined : o[k]), result);
      if (JSON.stringify(got) !== JSON.stringify(want)) fail(`${path} = ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    }
    const list = result?.topics ?? result?.groups ?? [];
    for (const n of e.names ?? []) if (!list.includes(n)) fail(`${n} not listed in ${JSON.stringify(list)}`);
    for (const n of e.absent_names ?? []) if (list.includes(n)) fail(`${n} listed`);
  }

  #checkMsgs(e, { msgs, elapsed }) {
    const n = msgs.length;
    if (e.count !== undefined && n !== e.count) fail(`${n} deliveries, want ${e.count}`);
    if (e.min_count !== undefined && n < e.min_count) fail(`${n} deliveries, want at least ${e.min_count}`);
    (e.messages ?? []).forEach((w, i) => {
      const m = msgs[i];
      if (!m) fail(`no delivery ${i}`);
      if (w.data !== undefined && m.string() !== w.data) fail(`delivery ${i} data ${JSON.stringify(m.string())}, want ${JSON.stringify(w.data)}`);
      if (w.data_size !== undefined && !Buffer.from(m.data).equals(pattern(sizeOf(w.data_size, this.vars)))) fail(`delivery ${i} data differs from the pattern`);
      if (w.subject !== undefined && m.subject !== w.subject) fail(`delivery ${i} subject ${m.subject}, want ${w.subject}`);
      if (w.delivery_count !== undefined && m.deliveryCount !== w.delivery_count) fail(`delivery ${i} count ${m.deliveryCount}, want ${w.delivery_count}`);
      for (const [k, v] of Object.entries(w.headers ?? {})) {
        const got = m.headers?.get(k);
        if (got !== v) fail(`delivery ${i} header ${k} = ${got}, want ${v}`);
      }
      for (const k of w.no_headers ?? []) if (m.headers?.has(k)) fail(`delivery ${i} has header ${k}`);
    });
    if (e.distinct_data !== undefined) {
      const d = new Set(msgs.map((m) => m.string()));
      if (d.size !== e.distinct_data || d.size !== n) fail(`${d.size} distinct payloads in ${n} deliveries, want ${e.distinct_data}`);
    }
    if (e.ordered_by_key) {
      const last = new Map();
      for (const m of msgs) {
        const [k, i] = m.string().split(':');
        if (last.has(k) && Number(i) <= last.get(k)) fail(`key ${k}: ${i} after ${last.get(k)}`);
        last.set(k, Number(i));
      }
    }
    if (e.same_partition_per_key) {
      const part = new Map();
      for (const m of msgs) {
        const k = m.string().split(':')[0];
        if (part.has(k) && part.get(k) !== m.partition) fail(`key ${k} in partitions ${part.get(k)} and ${m.partition}`);
        part.set(k, m.partition);
      }
    }
    if (e.distinct_partitions !== undefined) {
      const p = new Set(msgs.map((m) => m.partition));
      if (p.size !== e.distinct_partitions) fail(`${p.size} partitions, want ${e.distinct_partitions}`);
    }
    if (e.min_elapsed_ms !== undefined && elapsed < e.min_elapsed_ms) fail(`took ${elapsed} ms, want at least ${e.min_elapsed_ms}`);
    if (e.max_elapsed_ms !== undefined && elapsed > e.max_elapsed_ms) fail(`took ${elapsed} ms, want at most ${e.max_elapsed_ms}`);
  }
}

/** missingFeature returns the first required feature the environment lacks, or undefined. */
export function missingFeature(scenario, info, canRestart) {
  for (const f of scenario.requires ?? []) {
    const ok =
      f === 'fibril' ? (info.fibril ?? 0) >= 1 :
      f === 'restart' ? canRestart :
      info[f] === true || (Array.isArray(info.features) && info.features.includes(f));
    if (!ok) return f;
  }
  return undefined;
}
