// Soak harness for densa (bench/soak.sh runs it; Node built-in modules only).
//
// It starts its own densa processes (a colocated `densa serve`, and/or `densa router` in
// front of 2 prefill + 2 decode workers over UCX), computes every request shape's answer
// single-request first, then runs mixed concurrent load for --minutes: streamed and not,
// cancels mid-stream (client hang-up), shared prefixes in A->B->A orders, long and short
// prompts, chat and completions, cache salts, seeded sampling, KV integrity checks on
// (digest mode) and KV faults asked for by a fraction of requests (densa_inject_fault, served
// under --test-allow-fault-injection). In disaggregated mode one prefill and one decode
// worker are SIGKILLed in turn and restarted on their port.
//
// Judged (any failure makes the verdict FAIL):
//   - every answer that completed equals its single-request answer (greedy and seeded);
//     every cut-short answer (cancel, fault victim, killed worker) is a prefix of it;
//   - every error is explained: a request that asked for a fault failing with
//     kv_integrity_violation, or, in disaggregated mode, a request in flight during a worker
//     kill window failing with a router / transfer error kind; anything else (timeouts,
//     crashes, a violation on a request that asked for none) is unexplained;
//   - a mid-run pool audit (GET /health?audit=1) on every engine at every window, and after
//     drain: idle (nothing running or waiting, no page referenced) and the audit ok;
//   - RSS of every densa process that lived through the run (from /proc): over the samples
//     after warm-up, max(second half) <= max(first half) + the larger of --rss-slack-mib and
//     --rss-slack-pct percent;
//   - open fds of the same processes at two quiet points, after the references and after the
//     drain (no request in flight, then --quiet-s seconds for idle keep-alive connections and
//     pooled UCX workers to close: serve runs with --disagg-ucx-idle-ms --ucx-idle-ms): the
//     second count <= the first + --fd-slack. Under load a process's fds follow its load (HTTP
//     connections, one pooled UCX worker per concurrent transfer, each with its sockets), and
//     a worker kill moves the killed worker's load onto the survivors, so fds under load are
//     reported per window but judged only where they must come back;
//   - latency drift over the windows after warm-up, median of the last third of the windows
//     over the median of the first third: the engines' CPU time per generated token must
//     drift <= --max-cpu-drift (robust to other processes' load on a shared machine), the
//     wall-clock p50 <= --max-p50-drift and p99 <= --max-p99-drift (generous: wall time
//     moves with the machine's load).
// It prints one verdict line "SOAK PASS|FAIL ..." (exit 0 / 1) and writes report.json and
// the processes' logs under --out.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..');

// ---------------------------------------------------------------- options
const defaults = {
  densa: path.join(repo, 'build', 'densa'),
  model: path.join(repo, 'models', 'tinystories-mixtral-3.6m-f16.gguf'),
  corpus: '',
  minutes: 2,
  mode: 'both',            // colocated | disagg | both (both stacks at once, each with its own load)
  concurrency: 6,          // client lanes per stack
  faultFraction: 0.06,
  cancelFraction: 0.12,    // of streamed requests
  streamFraction: 0.5,
  killEveryS: 0,           // 0: minutes*60/8, at least 15 s
  restartDelayS: 2,
  windowS: 0,              // 0: minutes*60/10, at least 10 s
  warmupFraction: 0.25,
  threads: 1,              // kernel threads per densa process
  httpThreads: 16,         // serve --max-running-requests (HTTP threads: this + 16), router --max-connections
  kvCacheMemory: '2MiB',   // small on purpose: eviction and preemption under load
  rssSlackMib: 2,
  rssSlackPct: 2,
  fdSlack: 4,
  ucxIdleMs: 2000,         // serve --disagg-ucx-idle-ms: pooled UCX workers close this long after their last transfer
  quietS: 5,               // the wait at each quiet point (> keep-alive 2 s, > 1.5 x ucxIdleMs)
  maxCpuDrift: 1.5,
  maxP50Drift: 3,
  maxP99Drift: 5,
  requestTimeoutS: 120,
  seed: 1,
  out: '',
};

function parseArgs(argv) {
  const o = { ...defaults };
  const camel = (s) => s.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '-h' || a === '--help') {
      console.log(`usage: bench/soak.sh [--minutes N] [--mode colocated|disagg|both] [--densa PATH] [--out DIR]
  options (defaults): ${Object.entries(defaults).map(([k, v]) => `--${k.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())} ${JSON.stringify(v)}`).join(' ')}`);
      process.exit(0);
    }
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    const key = camel(a.slice(2));
    if (!(key in o)) throw new Error(`unknown option ${a}`);
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    o[key] = typeof defaults[key] === 'number' ? Number(v) : v;
    if (typeof defaults[key] === 'number' && !Number.isFinite(o[key])) throw new Error(`${a} needs a number, not ${v}`);
  }
  if (!['colocated', 'disagg', 'both'].includes(o.mode)) throw new Error(`--mode must be colocated, disagg or both`);
  if (!o.corpus) {
    for (const c of [path.join(repo, '..', 'shared', 'data', 'tinystories', 'valid.txt'), '/work/shared/data/tinystories/valid.txt'])
      if (fs.existsSync(c)) { o.corpus = c; break; }
  }
  if (!o.out) o.out = path.join(repo, 'build', 'soak-' + new Date().toISOString().replace(/[:.]/g, '-'));
  const runS = o.minutes * 60;
  if (!o.windowS) o.windowS = Math.max(10, runS / 10);
  if (!o.killEveryS) o.killEveryS = Math.max(15, runS / 8);
  return o;
}

const opt = parseArgs(process.argv.slice(2));
fs.mkdirSync(opt.out, { recursive: true });
const t0 = Date.now();
const now = () => (Date.now() - t0) / 1000;  // seconds since the harness started
const log = (...a) => console.error(`[soak ${now().toFixed(1)}s]`, ...a);

// Deterministic choices (mulberry32), so a run's mix is reproducible from --seed.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(opt.seed);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- processes
const agent = new http.Agent({ keepAlive: false, maxSockets: 256 });

function httpCall(url, method, body, { timeoutMs = 30000 } = {}) {
  return new Promise((resolve) => {
    const u = new URL(url);
    const data = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, agent,
      headers: data ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } : {} }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
      res.on('error', (e) => resolve({ status: 0, body: '', error: e.code || e.message }));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error('timeout')));
    req.on('error', (e) => resolve({ status: 0, body: '', error: e.code || e.message }));
    if (data) req.write(data);
    req.end();
  });
}
const getJson = async (url, timeoutMs) => {
  const r = await httpCall(url, 'GET', undefined, { timeoutMs });
  try { return { status: r.status, json: JSON.parse(r.body) }; } catch { return { status: r.status, json: null, error: r.error }; }
};

const procs = [];  // every DensaProc ever made

class DensaProc {
  constructor(name, args, { engine = true, killable = false } = {}) {
    this.name = name;
    this.args = args;
    this.engine = engine;      // has an engine (serve), vs the router
    this.killable = killable;  // the harness SIGKILLs it on purpose
    this.port = 0;
    this.lives = [];           // {pid, start, end}
    this.expectedExit = false;
    this.unexpectedExits = [];
    procs.push(this);
  }
  get url() { return `http://127.0.0.1:${this.port}`; }
  get pid() { return this.child ? this.child.pid : 0; }
  start() {
    const args = [...this.args, '--port', String(this.port)];
    const logPath = path.join(opt.out, `${this.name}.log`);
    const logFd = fs.openSync(logPath, 'a');
    fs.writeSync(logFd, `\n=== ${new Date().toISOString()} ${opt.densa} ${args.join(' ')}\n`);
    const env = { ...process.env, DENSA_POOL_SPIN_US: '0', UCX_TLS: process.env.UCX_TLS || 'tcp' };
    const child = spawn(opt.densa, args, { env, stdio: ['ignore', logFd, 'pipe'] });
    fs.closeSync(logFd);
    this.child = child;
    this.expectedExit = false;
    const life = { pid: child.pid, start: now(), end: null };
    this.lives.push(life);
    const logStream = fs.createWriteStream(logPath, { flags: 'a' });
    let buffered = '';
    const listening = new Promise((resolve, reject) => {
      child.stderr.on('data', (c) => {
        logStream.write(c);
        buffered += c.toString();
        const m = buffered.match(/listening on http:\/\/[^:\s]+:(\d+)/);
        if (m && !this.port) this.port = Number(m[1]);
        if (m) { buffered = ''; resolve(); }
        if (buffered.length > 65536) buffered = buffered.slice(-4096);
      });
      child.on('exit', (code, signal) => {
        life.end = now();
        if (!this.expectedExit) {
          this.unexpectedExits.push({ t: now(), code, signal });
          log(`${this.name} (pid ${life.pid}) exited unexpectedly: code ${code} signal ${signal}`);
        }
        reject(new Error(`${this.name} exited (${code ?? signal}) before listening; see ${logPath}`));
      });
    });
    listening.catch(() => {});
    this.listening = listening;
    return listening;
  }
  async waitHealthy(timeoutS = 60) {
    await this.listening;
    const end = Date.now() + timeoutS * 1000;
    while (Date.now() < end) {
      const h = await getJson(this.url + '/health', 2000);
      if (h.status === 200) return;
      await sleep(100);
    }
    throw new Error(`${this.name} not healthy within ${timeoutS} s`);
  }
  kill9() {
    this.expectedExit = true;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGKILL');
    return exited;
  }
  async stop() {
    if (!this.child || this.child.exitCode !== null || this.child.signalCode !== null) return null;
    this.expectedExit = true;
    const exited = new Promise((r) => this.child.once('exit', (code, signal) => r(code ?? signal)));
    this.child.kill('SIGTERM');
    const t = setTimeout(() => this.child.kill('SIGKILL'), 20000);
    const rc = await exited;
    clearTimeout(t);
    return rc;
  }
}

// HTTP thread pools sized to the load (6 lanes per stack): every pool thread keeps its own
// allocator caches (glibc tcache), so a pool of 128 mostly idle threads grows RSS for minutes
// before it levels off, which would hide a real leak in a short run (docs/performance/soak.md).
function serveArgs(extra) {
  return ['serve', '-m', opt.model, '--served-model-name', 'soak', '-t', String(opt.threads),
    '--max-running-requests', String(opt.httpThreads),
    '--kv-cache-memory', opt.kvCacheMemory, '--kv-integrity', 'digest',
    '--disagg-ucx-idle-ms', String(opt.ucxIdleMs),
    ...(opt.faultFraction > 0 ? ['--test-allow-fault-injection'] : []), ...extra];
}

// ---------------------------------------------------------------- /proc sampling
const pageKib = 4;
const clockTicks = 100;
function procSample(pid) {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = Number((status.match(/VmRSS:\s+(\d+)/) || [])[1]);
    const fds = fs.readdirSync(`/proc/${pid}/fd`).length;
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const cpu = (Number(fields[11]) + Number(fields[12])) / clockTicks;  // utime + stime, seconds
    return { rssKib: rss, fds, cpu };
  } catch {
    return null;
  }
}
void pageKib;

const samples = [];  // {t, name, pid, rssKib, fds, cpu}
function sampleAll() {
  for (const p of procs) {
    if (!p.child || p.child.exitCode !== null || p.child.signalCode !== null) continue;
    const s = procSample(p.pid);
    if (s) samples.push({ t: now(), name: p.name, pid: p.pid, ...s });
  }
}

// ---------------------------------------------------------------- request shapes
function corpusParagraphs() {
  const text = fs.readFileSync(opt.corpus, 'utf8');
  return text.split(/\n\s*\n/).map((p) => p.replace(/\s+/g, ' ').trim())
    .filter((p) => p.length > 40 && /^[\x20-\x7e]+$/.test(p));
}

async function tokenCount(url, text) {
  const r = await httpCall(url + '/tokenize', 'POST', { prompt: text });
  const j = JSON.parse(r.body);
  if (r.status !== 200) throw new Error(`/tokenize: ${r.status} ${r.body}`);
  return j.count;
}

// Cuts `text` at a word boundary to at most `maxTokens` tokens (by the server's tokenizer).
async function cutToTokens(url, text, maxTokens) {
  let words = text.split(' ');
  let n = await tokenCount(url, words.join(' '));
  while (n > maxTokens && words.length > 1) {
    words = words.slice(0, Math.max(1, Math.floor(words.length * maxTokens / n) - 1));
    n = await tokenCount(url, words.join(' '));
  }
  return { text: words.join(' '), tokens: n };
}

// The request shapes of one run: each has a body (without stream) and, once references are
// computed, its single-request answer.
async function makeShapes(tokUrl, context) {
  const paras = corpusParagraphs();
  const r = rng(opt.seed * 7919 + 1);
  const para = () => paras[Math.floor(r() * paras.length)];
  const shapes = [];
  const add = (kind, body, extra = {}) => shapes.push({ id: shapes.length, kind, body, ...extra });
  // Short prompts.
  for (let i = 0; i < 6; ++i) {
    const words = para().split(' ').slice(0, 1 + Math.floor(r() * 6)).join(' ');
    add('short', { prompt: words, max_tokens: 8 + Math.floor(r() * 40), temperature: 0 });
  }
  // Long prompts: 150-200 tokens, up to the context with the completion.
  for (let i = 0; i < 5; ++i) {
    let text = para();
    while (text.length < 1400) text += ' ' + para();
    const cut = await cutToTokens(tokUrl, text, 150 + Math.floor(r() * 50));
    add('long', { prompt: cut.text, max_tokens: Math.min(context - cut.tokens - 1, 24 + Math.floor(r() * 40)), temperature: 0 });
  }
  // Shared-prefix families: A and B share a 3-6 page prefix and differ after it.
  const families = [];
  for (let f = 0; f < 4; ++f) {
    let text = para();
    while (text.length < 700) text += ' ' + para();
    const prefix = (await cutToTokens(tokUrl, text, 48 + Math.floor(r() * 48))).text;
    const ids = [];
    for (const tail of [para().split(' ').slice(0, 6).join(' '), para().split(' ').slice(0, 9).join(' ')]) {
      ids.push(shapes.length);
      add('prefix', { prompt: prefix + ' ' + tail, max_tokens: 16 + Math.floor(r() * 32), temperature: 0, ignore_eos: true },
        { family: f });
    }
    families.push(ids);
  }
  // Chat (the plain fallback template of the fixture).
  for (let i = 0; i < 3; ++i) {
    add('chat', { messages: [{ role: 'user', content: para().split(' ').slice(0, 12).join(' ') }], max_tokens: 24, temperature: 0 },
      { chat: true });
  }
  // Stop strings and seeded sampling: deterministic too, checked the same way.
  add('stop', { prompt: para().split(' ').slice(0, 8).join(' '), max_tokens: 48, temperature: 0, stop: ['.', '!'] });
  for (let i = 0; i < 3; ++i) {
    add('seeded', { prompt: para().split(' ').slice(0, 5).join(' '), max_tokens: 32, temperature: 0.9, top_p: 0.95, seed: 1000 + i });
  }
  return { shapes, families };
}

function endpointOf(shape) { return shape.chat ? '/v1/chat/completions' : '/v1/completions'; }

// One request. Streams are read event by event; `cancelAfter` events, the client hangs up.
function send(baseUrl, shape, { stream = false, cancelAfter = 0, fault = null, salt = null } = {}) {
  const body = { ...shape.body, stream };
  if (stream) body.stream_options = { include_usage: true };
  if (fault) body.densa_inject_fault = fault;
  if (salt) body.cache_salt = salt;
  const data = JSON.stringify(body);
  const u = new URL(baseUrl + endpointOf(shape));
  const rec = { shape: shape.id, kind: shape.kind, stream, cancelAfter, fault, salt, start: now(), end: null,
    status: 0, text: '', finish: null, error: null, cancelled: false, ttft: null, tokens: 0 };
  return new Promise((resolve) => {
    let done = false;
    const finish = () => { if (!done) { done = true; rec.end = now(); resolve(rec); } };
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', agent,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } }, (res) => {
      rec.status = res.statusCode;
      let buf = '';
      let events = 0;
      res.setEncoding('utf8');
      res.on('data', (c) => {
        buf += c;
        if (!stream || res.statusCode !== 200) return;
        let at;
        while ((at = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, at);
          buf = buf.slice(at + 2);
          for (const line of ev.split('\n')) {
            if (!line.startsWith('data: ')) continue;
            const payload = line.slice(6);
            if (payload === '[DONE]') { rec.done = true; continue; }
            let j;
            try { j = JSON.parse(payload); } catch { rec.error = { kind: 'bad_sse', message: payload.slice(0, 200) }; continue; }
            if (j.error) { rec.error = { kind: j.error.code || j.error.type || 'stream_error', message: j.error.message, inStream: true }; continue; }
            for (const ch of j.choices || []) {
              const piece = shape.chat ? (ch.delta && ch.delta.content) || '' : ch.text || '';
              if (piece && rec.ttft === null) rec.ttft = now() - rec.start;
              rec.text += piece;
              if (ch.finish_reason) rec.finish = ch.finish_reason;
            }
            if (j.usage) rec.tokens = j.usage.completion_tokens;
            ++events;
            if (cancelAfter > 0 && events >= cancelAfter && !rec.finish) {
              rec.cancelled = true;
              req.destroy();
              finish();
              return;
            }
          }
        }
      });
      res.on('end', () => {
        if (!stream || res.statusCode !== 200) {
          let j = null;
          try { j = JSON.parse(buf); } catch { /* below */ }
          if (res.statusCode === 200 && j && j.choices) {
            const ch = j.choices[0];
            rec.text = shape.chat ? ch.message.content || '' : ch.text;
            rec.finish = ch.finish_reason;
            rec.tokens = j.usage ? j.usage.completion_tokens : 0;
          } else {
            rec.error = { kind: (j && j.error && (j.error.code || j.error.type)) || `http_${res.statusCode}`,
              message: j && j.error ? j.error.message : buf.slice(0, 300) };
          }
        } else if (!rec.done && !rec.error && !rec.cancelled) {
          rec.error = { kind: 'stream_cut', message: 'stream ended without [DONE]' };
        }
        finish();
      });
      res.on('error', (e) => { if (!rec.cancelled) rec.error = { kind: 'connection', message: e.code || e.message }; finish(); });
    });
    req.setTimeout(opt.requestTimeoutS * 1000, () => { rec.error = { kind: 'timeout', message: `no answer within ${opt.requestTimeoutS} s` }; req.destroy(); });
    req.on('error', (e) => {
      if (rec.cancelled) return finish();
      if (!rec.error) rec.error = { kind: 'connection', message: e.code || e.message };
      finish();
    });
    req.write(data);
    req.end();
  });
}

// ---------------------------------------------------------------- one stack under load
const FAULTS = ['page-reuse', 'late-write', 'evict-in-use', 'stale-table', 'off-by-one', 'bit-flip'];
// What a client of the router may see when a worker it was using is SIGKILLed (src/router/README.md).
const KILL_KINDS = new Set(['upstream_failed', 'kv_transfer_failed', 'no_healthy_worker', 'http_502', 'http_503', 'stream_cut']);

class Stack {
  constructor(mode) {
    this.mode = mode;
    this.records = [];
    this.kills = [];      // {name, t, ready, windowEnd}
    this.audits = [];     // {t, name, ok, body}
    this.windows = [];
    this.inFlight = 0;
  }
  async start() {
    if (this.mode === 'colocated') {
      this.server = new DensaProc('colocated-serve', serveArgs([]));
      this.server.start();
      await this.server.waitHealthy();
      this.engines = [this.server];
      this.front = this.server;
      this.tokUrl = this.server.url;
    } else {
      const p = (i) => new DensaProc(`disagg-prefill${i}`, serveArgs(['--role', 'prefill']), { killable: i === 2 });
      const d = (i) => new DensaProc(`disagg-decode${i}`, serveArgs(['--role', 'decode', '--disagg-timeout-ms', '20000']),
        { killable: i === 2 });
      this.prefill = [p(1), p(2)];
      this.decode = [d(1), d(2)];
      this.engines = [...this.prefill, ...this.decode];
      for (const e of this.engines) e.start();
      for (const e of this.engines) await e.waitHealthy();
      this.router = new DensaProc('disagg-router', ['router', '--prefill', this.prefill.map((w) => w.url).join(','),
        '--decode', this.decode.map((w) => w.url).join(','), '--health-interval-ms', '500', '--failure-hold-ms', '1000',
        '--timeout-ms', '60000', '--max-connections', String(opt.httpThreads)], { engine: false });
      this.router.start();
      await this.router.waitHealthy();
      this.front = this.router;
      this.tokUrl = this.decode[0].url;
    }
    const models = await getJson(this.tokUrl + '/health', 2000);
    if (models.status !== 200) throw new Error(`${this.mode}: /health ${models.status}`);
  }
  async references(shapes) {
    this.refs = [];
    for (const s of shapes) {
      const r = await send(this.front.url, s);
      if (r.error || r.status !== 200) throw new Error(`${this.mode}: reference for shape ${s.id} failed: ${JSON.stringify(r.error)}`);
      this.refs.push(r.text);
    }
  }
  classify(rec) {
    const ref = this.refs[rec.shape];
    rec.refLen = ref.length;
    const prefixOk = ref.startsWith(rec.text);
    if (!rec.error && rec.cancelled) { rec.outcome = prefixOk ? 'cancelled' : 'wrong'; return; }
    if (!rec.error) { rec.outcome = rec.text === ref ? 'ok' : 'wrong'; return; }
    if (!prefixOk) { rec.outcome = 'wrong'; return; }  // whatever it got before the error must be right
    if (rec.error.kind === 'kv_integrity_violation' && rec.fault) { rec.outcome = 'fault_victim'; return; }
    if (this.mode === 'disagg' && KILL_KINDS.has(rec.error.kind) &&
        this.kills.some((k) => rec.start <= k.windowEnd && rec.end >= k.t - 0.05)) {
      rec.outcome = 'killed_worker'; return;
    }
    rec.outcome = 'unexplained';
  }
  async lane(deadline, shapes, families) {
    while (now() < deadline) {
      if (rand() < 0.15) {
        // A -> B -> A on one family, one after the other: B evicts nothing A needs, A's second
        // answer comes from cached pages and must equal its first.
        const [a, b] = families[Math.floor(rand() * families.length)];
        for (const id of [a, b, a]) await this.one(shapes[id]);
      } else {
        await this.one(pick(shapes));
      }
    }
  }
  async one(shape) {
    const stream = rand() < opt.streamFraction;
    const cancelAfter = stream && rand() < opt.cancelFraction ? 1 + Math.floor(rand() * 4) : 0;
    const fault = rand() < opt.faultFraction ? pick(FAULTS) : null;
    const salt = rand() < 0.1 ? pick(['tenant-a', 'tenant-b']) : null;
    ++this.inFlight;
    const rec = await send(this.front.url, shape, { stream, cancelAfter, fault, salt });
    --this.inFlight;
    this.classify(rec);
    if (rec.outcome === 'wrong' || rec.outcome === 'unexplained')
      log(`${this.mode}: ${rec.outcome}: ${JSON.stringify({ ...rec, ref: this.refs[rec.shape] })}`);
    this.records.push(rec);
  }
  async killer(deadline) {
    const victims = [this.prefill[1], this.decode[1]];
    let k = 0;
    while (true) {
      await sleep(opt.killEveryS * 1000);
      if (now() + opt.restartDelayS + 5 >= deadline) return;
      const w = victims[k++ % victims.length];
      const kill = { name: w.name, t: now(), ready: null, windowEnd: Infinity };
      this.kills.push(kill);
      log(`${this.mode}: SIGKILL ${w.name} (pid ${w.pid})`);
      await w.kill9();
      await sleep(opt.restartDelayS * 1000);
      w.start();
      await w.waitHealthy();
      kill.ready = now();
      // The router re-admits it after a 200 probe (--health-interval-ms 500) once its failure
      // hold (1 s) is over; requests that started before then may still meet the dead one.
      kill.windowEnd = kill.ready + 1 + 0.5 + 1;
      log(`${this.mode}: ${w.name} back (pid ${w.pid})`);
    }
  }
  // Generated tokens of every engine life so far (a restarted worker's counter starts at 0:
  // the last value read from each pid is kept).
  async metricsSnapshot() {
    this.tokensByPid = this.tokensByPid || new Map();
    for (const e of this.engines) {
      if (!alive(e)) continue;
      const pid = e.pid;
      const r = await httpCall(e.url + '/metrics', 'GET', undefined, { timeoutMs: 5000 });
      const m = r.body.match(/\ndensa_generation_tokens_total (\S+)/);
      if (r.status === 200 && m && e.pid === pid) this.tokensByPid.set(pid, Number(m[1]));
    }
    let tokens = 0;
    for (const v of this.tokensByPid.values()) tokens += v;
    return tokens;
  }
  // A worker being killed or restarted is skipped (its pool died with it).
  async audit(tag) {
    for (const e of this.engines) {
      const restarting = () => !alive(e) || this.kills.some((k) => k.name === e.name && k.ready === null);
      if (restarting()) continue;
      const pid = e.pid;
      const h = await getJson(e.url + '/health?audit=1', 30000);
      if (h.status !== 200 && (restarting() || e.pid !== pid)) continue;
      const ok = h.status === 200 && h.json && h.json.audit === 'ok';
      this.audits.push({ t: now(), tag, name: e.name, pid: e.pid, ok, body: h.json });
      if (!ok) log(`${this.mode}: audit ${tag} of ${e.name} failed: ${h.status} ${JSON.stringify(h.json)}`);
    }
  }
  // After the load: every engine idle and its audit clean (bounded wait for in-flight cleanup).
  async drainAudit() {
    const end = Date.now() + 60000;
    const results = [];
    for (const e of this.engines) {
      let last = null;
      while (Date.now() < end) {
        const h = await getJson(e.url + '/health?audit=1', 30000);
        last = h;
        if (h.status === 200 && h.json.audit === 'ok' && h.json.requests_running === 0 && h.json.requests_waiting === 0 &&
            h.json.kv_pages_used === 0) break;
        await sleep(250);
      }
      const ok = last && last.status === 200 && last.json.audit === 'ok' && last.json.requests_running === 0 &&
        last.json.requests_waiting === 0 && last.json.kv_pages_used === 0;
      results.push({ name: e.name, ok, health: last && last.json });
      if (!ok) log(`${this.mode}: drain audit of ${e.name} failed: ${JSON.stringify(last)}`);
    }
    this.drain = results;
    return results.every((r) => r.ok);
  }
  all() { return this.mode === 'colocated' ? [this.server] : [...this.engines, this.router]; }
}

// ---------------------------------------------------------------- judging
const quantile = (xs, q) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const median = (xs) => quantile(xs, 0.5);

// Open fds of every live process after --quiet-s seconds with no request in flight.
async function quietFds(what) {
  await sleep(opt.quietS * 1000);
  const out = new Map();
  for (const p of procs) {
    if (!p.child || p.child.exitCode !== null || p.child.signalCode !== null) continue;
    const s = procSample(p.pid);
    if (s) out.set(p.name, { pid: p.pid, fds: s.fds });
  }
  log(`quiet point ${what}: fds ${[...out].map(([n, v]) => `${n}=${v.fds}`).join(' ')}`);
  return out;
}

function driftOf(values) {
  const v = values.filter((x) => x !== null && Number.isFinite(x));
  if (v.length < 2) return null;
  const third = Math.max(1, Math.floor(v.length / 3));
  return median(v.slice(-third)) / median(v.slice(0, third));
}

function flatness(name, warmupEnd) {
  const p = procs.find((x) => x.name === name);
  const pids = new Set(p.lives.map((l) => l.pid));
  if (pids.size !== 1) return { name, judged: false, reason: `restarted ${pids.size - 1} times` };
  const s = samples.filter((x) => x.name === name && x.t >= warmupEnd);
  if (s.length < 4) return { name, judged: false, reason: 'too few samples' };
  const half = Math.floor(s.length / 2);
  const first = s.slice(0, half), second = s.slice(half);
  const max = (xs, k) => Math.max(...xs.map((x) => x[k]));
  const rss1 = max(first, 'rssKib'), rss2 = max(second, 'rssKib');
  const rssSlack = Math.max(opt.rssSlackMib * 1024, rss1 * opt.rssSlackPct / 100);
  const fd1 = max(first, 'fds'), fd2 = max(second, 'fds');
  // Least-squares slope of RSS over the judged samples, for the report.
  const mt = s.reduce((a, x) => a + x.t, 0) / s.length, mr = s.reduce((a, x) => a + x.rssKib, 0) / s.length;
  const slope = s.reduce((a, x) => a + (x.t - mt) * (x.rssKib - mr), 0) / Math.max(1e-9, s.reduce((a, x) => a + (x.t - mt) ** 2, 0));
  const all = samples.filter((x) => x.name === name);
  return { name, judged: true, samples: s.length, rssFirstMaxKib: rss1, rssSecondMaxKib: rss2, rssSlackKib: Math.round(rssSlack),
    rssOk: rss2 <= rss1 + rssSlack, fdFirstMax: fd1, fdSecondMax: fd2,
    rssSlopeKibPerMin: Math.round(slope * 60 * 10) / 10, rssStartKib: all[0].rssKib, rssEndKib: all[all.length - 1].rssKib,
    fdStart: all[0].fds, fdEnd: all[all.length - 1].fds };
}

// ---------------------------------------------------------------- main
async function main() {
  log(`options ${JSON.stringify(opt)}`);
  if (!fs.existsSync(opt.densa)) throw new Error(`no densa binary at ${opt.densa} (build it, or pass --densa)`);
  const modes = opt.mode === 'both' ? ['colocated', 'disagg'] : [opt.mode];
  const stacks = modes.map((m) => new Stack(m));
  const sampler = setInterval(sampleAll, 2000);
  let verdict = 'FAIL';
  const problems = [];
  try {
    await Promise.all(stacks.map((s) => s.start()));
    sampleAll();
    const context = 256;
    const { shapes, families } = await makeShapes(stacks[0].tokUrl, context);
    for (const s of stacks) await s.references(shapes);
    log(`${shapes.length} request shapes, references computed single-request`);
    const quietBefore = await quietFds('after the references');
    if (stacks.length === 2) {
      // The same greedy answers either way (one model, one KV precision).
      const differ = shapes.filter((s) => stacks[0].refs[s.id] !== stacks[1].refs[s.id]).map((s) => s.id);
      if (differ.length) problems.push(`colocated and disaggregated single-request answers differ for shapes ${differ.join(',')}`);
    }
    const loadStart = now();
    const deadline = loadStart + opt.minutes * 60;
    const warmupEnd = loadStart + opt.minutes * 60 * opt.warmupFraction;
    // Windows: latency quantiles from the records, CPU per generated token from /proc and /metrics.
    const windowTask = (async () => {
      const prev = new Map();
      for (const s of stacks) prev.set(s, { tokens: await s.metricsSnapshot(), cpu: cpuOf(s) });
      let w = 0;
      let wStart = loadStart;
      while (now() < deadline - 0.5) {
        await sleep(Math.max(0, Math.min(wStart + opt.windowS, deadline) - now()) * 1000);
        const wEnd = now();
        for (const s of stacks) {
          const tokens = await s.metricsSnapshot();
          const cpu = cpuOf(s);
          const p = prev.get(s);
          const recs = s.records.filter((r) => r.end > wStart && r.end <= wEnd && r.outcome === 'ok' && !r.stream);
          const lat = recs.map((r) => r.end - r.start);
          const ttft = s.records.filter((r) => r.end > wStart && r.end <= wEnd && r.stream && r.ttft !== null).map((r) => r.ttft);
          const dTok = tokens - p.tokens;
          s.windows.push({ index: w, start: wStart - loadStart, end: wEnd - loadStart, postWarmup: wStart >= warmupEnd - 1e-6,
            requests: s.records.filter((r) => r.end > wStart && r.end <= wEnd).length,
            p50: quantile(lat, 0.5), p99: quantile(lat, 0.99), ttftP50: quantile(ttft, 0.5), ttftP99: quantile(ttft, 0.99),
            cpuPerKTok: dTok > 0 ? (cpu - p.cpu) / dTok * 1000 : null, tokens: dTok,
            loadavg: Number(fs.readFileSync('/proc/loadavg', 'utf8').split(' ')[0]) });
          const mem = {};
          for (const p of s.all()) {
            const last = samples.filter((x) => x.name === p.name).pop();
            if (last) mem[p.name] = { rssMib: Math.round(last.rssKib / 102.4) / 10, fds: last.fds };
          }
          s.windows[s.windows.length - 1].procs = mem;
          prev.set(s, { tokens, cpu });
          await s.audit(`window ${w}`);
          const last = s.windows[s.windows.length - 1];
          log(`${s.mode} window ${w}: ${last.requests} req, p50 ${fmt(last.p50)} s, p99 ${fmt(last.p99)} s, ` +
            `cpu/ktok ${fmt(last.cpuPerKTok)} s, load ${last.loadavg}`);
        }
        ++w;
        wStart = wEnd;
      }
    })();
    const tasks = [];
    for (const s of stacks) {
      for (let i = 0; i < opt.concurrency; ++i) tasks.push(s.lane(deadline, shapes, families));
      if (s.mode === 'disagg') tasks.push(s.killer(deadline));
    }
    await Promise.all(tasks);
    await windowTask;
    log('load over; draining');
    for (const s of stacks) if (!(await s.drainAudit())) problems.push(`${s.mode}: not idle or audit failed after drain`);
    sampleAll();
    const quietAfter = await quietFds('after the drain');
    // ---- judge
    const report = { options: opt, machine: machine(), modes: {} };
    const counts = { requests: 0, checked: 0, wrong: 0, victims: 0, killed: 0, unexplained: 0, cancels: 0, faultsAsked: 0, kills: 0 };
    for (const s of stacks) {
      const by = (o) => s.records.filter((r) => r.outcome === o).length;
      const c = { requests: s.records.length, ok: by('ok'), wrong: by('wrong'), cancelled: by('cancelled'), fault_victim: by('fault_victim'),
        killed_worker: by('killed_worker'), unexplained: by('unexplained'), faults_asked: s.records.filter((r) => r.fault).length,
        streamed: s.records.filter((r) => r.stream).length, kills: s.kills.length };
      counts.requests += c.requests; counts.checked += c.ok + c.cancelled + c.fault_victim + c.killed_worker + c.wrong;
      counts.wrong += c.wrong; counts.victims += c.fault_victim; counts.killed += c.killed_worker; counts.unexplained += c.unexplained;
      counts.cancels += c.cancelled; counts.faultsAsked += c.faults_asked; counts.kills += c.kills;
      const post = s.windows.filter((w) => w.postWarmup);
      const drift = { p50: driftOf(post.map((w) => w.p50)), p99: driftOf(post.map((w) => w.p99)), cpuPerToken: driftOf(post.map((w) => w.cpuPerKTok)) };
      const flat = s.all().filter((p) => !p.killable).map((p) => flatness(p.name, warmupEnd));
      for (const f of flat) {
        const b = quietBefore.get(f.name), a = quietAfter.get(f.name);
        f.fdQuietBefore = b ? b.fds : null;
        f.fdQuietAfter = a ? a.fds : null;
        // The same process at both quiet points (a restarted one is not judged: reason above).
        f.fdOk = !!(b && a && b.pid === a.pid && a.fds <= b.fds + opt.fdSlack);
      }
      const auditFails = s.audits.filter((a) => !a.ok).length;
      const unexpected = s.all().flatMap((p) => p.unexpectedExits.map((e) => `${p.name} exited (${e.code ?? e.signal}) at ${e.t.toFixed(1)} s`));
      if (c.wrong) problems.push(`${s.mode}: ${c.wrong} wrong answers`);
      if (c.unexplained) problems.push(`${s.mode}: ${c.unexplained} unexplained errors`);
      if (auditFails) problems.push(`${s.mode}: ${auditFails} mid-run audits failed`);
      for (const u of unexpected) problems.push(`${s.mode}: ${u}`);
      for (const f of flat) {
        if (f.judged && !f.rssOk) problems.push(`${f.name}: RSS grew ${f.rssFirstMaxKib} -> ${f.rssSecondMaxKib} KiB (slack ${f.rssSlackKib})`);
        if (f.judged && !f.fdOk) problems.push(`${f.name}: fds at the quiet points grew ${f.fdQuietBefore} -> ${f.fdQuietAfter} (slack ${opt.fdSlack})`);
        if (!f.judged) problems.push(`${f.name}: RSS / fds not judged (${f.reason})`);
      }
      if (drift.cpuPerToken === null || drift.p50 === null) problems.push(`${s.mode}: too few windows to judge drift`);
      if (drift.cpuPerToken !== null && drift.cpuPerToken > opt.maxCpuDrift) problems.push(`${s.mode}: CPU per token drifted x${fmt(drift.cpuPerToken)}`);
      if (drift.p50 !== null && drift.p50 > opt.maxP50Drift) problems.push(`${s.mode}: p50 latency drifted x${fmt(drift.p50)}`);
      if (drift.p99 !== null && drift.p99 > opt.maxP99Drift) problems.push(`${s.mode}: p99 latency drifted x${fmt(drift.p99)}`);
      const errorKinds = {};
      for (const r of s.records.filter((x) => x.error)) {
        const k = `${r.outcome}:${r.error.kind}`;
        errorKinds[k] = (errorKinds[k] || 0) + 1;
      }
      report.modes[s.mode] = { counts: c, errorKinds, drift, windows: s.windows, flatness: flat, kills: s.kills, drain: s.drain,
        audits: { total: s.audits.length, failed: auditFails }, unexpectedExits: unexpected,
        unexplained: s.records.filter((r) => r.outcome === 'unexplained' || r.outcome === 'wrong').slice(0, 50)
          .map((r) => ({ ...r, ref: s.refs[r.shape] })) };
      log(`${s.mode}: ${JSON.stringify(c)} errors ${JSON.stringify(errorKinds)} drift ${JSON.stringify(drift)}`);
      for (const f of flat) log(`${s.mode}: ${JSON.stringify(f)}`);
    }
    if (counts.faultsAsked > 0 && counts.victims === 0) problems.push('no asked-for fault fired: the fault path was not exercised');
    if (stacks.some((s) => s.mode === 'disagg') && counts.kills === 0) problems.push('no worker was killed');
    verdict = problems.length ? 'FAIL' : 'PASS';
    report.problems = problems;
    report.verdict = verdict;
    fs.writeFileSync(path.join(opt.out, 'report.json'), JSON.stringify(report, null, 1));
    fs.writeFileSync(path.join(opt.out, 'summary.md'), summaryMarkdown(report));
    const driftText = stacks.map((s) => {
      const d = report.modes[s.mode].drift;
      return `${s.mode}:p50x${fmt(d.p50)},p99x${fmt(d.p99)},cpu/tokx${fmt(d.cpuPerToken)}`;
    }).join(' ');
    for (const p of problems) log(`problem: ${p}`);
    console.log(`SOAK ${verdict} mode=${opt.mode} minutes=${opt.minutes} requests=${counts.requests} checked=${counts.checked} ` +
      `wrong=${counts.wrong} errors=${counts.victims + counts.killed + counts.unexplained} (fault_victims=${counts.victims} ` +
      `killed_worker=${counts.killed} unexplained=${counts.unexplained}) faults_asked=${counts.faultsAsked} cancels=${counts.cancels} ` +
      `kills=${counts.kills} audit=${problems.some((p) => /audit/.test(p)) ? 'FAIL' : 'ok'} ` +
      `rss_fds=${problems.some((p) => /RSS|fds/.test(p)) ? 'FAIL' : 'flat'} drift=${driftText} report=${path.join(opt.out, 'report.json')}`);
  } catch (e) {
    log(`error: ${e.stack || e}`);
    console.log(`SOAK FAIL mode=${opt.mode} minutes=${opt.minutes} harness error: ${e.message}`);
  } finally {
    clearInterval(sampler);
    for (const p of [...procs].reverse()) {
      const rc = await p.stop();
      if (rc !== null && rc !== 0 && verdict === 'PASS') {
        verdict = 'FAIL';
        console.log(`SOAK FAIL: ${p.name} exited ${rc} on SIGTERM`);
      }
    }
  }
  process.exit(verdict === 'PASS' ? 0 : 1);
}

// The windows of every mode as Markdown tables (what docs/performance/soak.md quotes).
function summaryMarkdown(report) {
  let md = '';
  for (const [mode, m] of Object.entries(report.modes)) {
    const names = [...new Set(m.windows.flatMap((w) => Object.keys(w.procs || {})))];
    md += `### ${mode}\n\n| window (s) | requests | p50 (s) | p99 (s) | TTFT p50 (s) | CPU s / 1k tok | load | ` +
      names.map((n) => `${n.replace(/^(colocated|disagg)-/, '')} RSS MiB / fds`).join(' | ') + ' |\n';
    md += '|' + ' --- |'.repeat(7 + names.length) + '\n';
    for (const w of m.windows) {
      md += `| ${w.start.toFixed(0)}-${w.end.toFixed(0)}${w.postWarmup ? '' : ' (warm-up)'} | ${w.requests} | ${fmt(w.p50)} | ` +
        `${fmt(w.p99)} | ${fmt(w.ttftP50)} | ${fmt(w.cpuPerKTok)} | ${w.loadavg} | ` +
        names.map((n) => (w.procs && w.procs[n] ? `${w.procs[n].rssMib} / ${w.procs[n].fds}` : '-')).join(' | ') + ' |\n';
    }
    md += `\ncounts ${JSON.stringify(m.counts)}; errors ${JSON.stringify(m.errorKinds)}; drift ${JSON.stringify(m.drift)}\n\n`;
  }
  return md;
}

function alive(p) { return p.child && p.child.exitCode === null && p.child.signalCode === null; }

function cpuOf(stack) {
  // CPU seconds of the stack's processes now alive, plus those of lives that ended (last sample).
  let total = 0;
  for (const p of stack.all()) {
    for (const life of p.lives) {
      const alive = p.child && p.child.pid === life.pid && p.child.exitCode === null && p.child.signalCode === null;
      const s = alive ? procSample(life.pid) : null;
      if (s) { total += s.cpu; continue; }
      const last = samples.filter((x) => x.pid === life.pid).pop();
      if (last) total += last.cpu;
    }
  }
  return total;
}

function machine() {
  const cpu = fs.readFileSync('/proc/cpuinfo', 'utf8');
  return { model: (cpu.match(/model name\s*:\s*(.*)/) || [])[1], cores: (cpu.match(/^processor/gm) || []).length,
    memTotal: (fs.readFileSync('/proc/meminfo', 'utf8').match(/MemTotal:\s*(.*)/) || [])[1] };
}

const fmt = (x) => (x === null || x === undefined ? 'n/a' : Number(x).toFixed(x < 0.1 ? 4 : 3));

// Interrupted: take the densa processes down with the harness.
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    for (const p of procs) if (alive(p)) { p.expectedExit = true; p.child.kill('SIGKILL'); }
    console.log(`SOAK FAIL mode=${opt.mode} minutes=${opt.minutes} interrupted by ${sig}`);
    process.exit(1);
  });
}

main();
