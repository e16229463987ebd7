// llama.cpp's perplexity of a GGUF on token ids, windowed like densa's quality/perplexity.h
// (non-overlapping windows of --ctx tokens, the first replaced by BOS, each window from
// position 0 on a fresh sequence, NLL from a double log-softmax of the fp32 logits), through
// node-llama-cpp's prebuilt CPU llama.cpp (bench/llamacpp/install.sh first).
// With BASE.gguf (the F16 file), also llama.cpp's own KL divergence of MODEL against BASE per
// predicted position (what llama-perplexity --kl-divergence reports): mean, p99, same top-1.
// Usage: node llamacpp_ppl.mjs MODEL.gguf IDS.u16.bin CTX [MAX_WINDOWS [BASE.gguf]]  -> one JSON line
import {readFileSync} from "node:fs";
import {getLlama} from "node-llama-cpp";

const [modelPath, idsPath, ctxArg, maxArg, basePath] = process.argv.slice(2);
const ctxLen = Number(ctxArg);
const raw = readFileSync(idsPath);
const ids = Array.from(new Uint16Array(raw.buffer, raw.byteOffset, raw.length / 2));
let windows = Math.floor(ids.length / ctxLen);
if (maxArg) windows = Math.min(windows, Number(maxArg));

// logits: node-llama-cpp's Map token -> raw logit (every vocabulary entry).
function logSoftmaxAt(logits, target) {
  let max = -Infinity;
  for (const v of logits.values()) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits.values()) sum += Math.exp(v - max);
  return logits.get(target) - max - Math.log(sum);
}

// The log-softmax of every vocabulary entry, as an array indexed by token.
function logSoftmax(logits) {
  let max = -Infinity, size = 0;
  for (const [t, v] of logits) { max = Math.max(max, v); size = Math.max(size, t + 1); }
  let sum = 0;
  for (const v of logits.values()) sum += Math.exp(v - max);
  const lse = max + Math.log(sum);
  const out = new Float64Array(size).fill(-Infinity);
  for (const [t, v] of logits) out[t] = v - lse;
  return out;
}

function argmax(a) {
  let best = 0;
  for (let i = 1; i < a.length; ++i) if (a[i] > a[best]) best = i;
  return best;
}

const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
async function open(path) {
  const model = await llama.loadModel({modelPath: path, gpuLayers: 0});
  const context = await model.createContext({contextSize: ctxLen + 8, batchSize: ctxLen, threads: 2});
  return {model, seq: context.getSequence()};
}
const q = await open(modelPath);
const base = basePath ? await open(basePath) : null;
const bos = q.model.tokens.bos ?? 1;
let nllAll = 0, nAll = 0, nllHalf = 0, nHalf = 0;
const kls = [];
let sameTop1 = 0;
for (let w = 0; w < windows; ++w) {
  const win = ids.slice(w * ctxLen, (w + 1) * ctxLen);
  win[0] = bos;
  const run = async (m) => { await m.seq.clearHistory(); return m.seq.controlledEvaluate(win.map((t) => [t, {generateNext: {logits: true}}])); };
  const out = await run(q);
  const outBase = base ? await run(base) : null;
  for (let i = 0; i + 1 < ctxLen; ++i) {
    const lp = logSoftmaxAt(out[i].next.logits, win[i + 1]);
    nllAll -= lp; ++nAll;
    if (i >= ctxLen / 2) { nllHalf -= lp; ++nHalf; }
    if (outBase) {
      const a = logSoftmax(outBase[i].next.logits), b = logSoftmax(out[i].next.logits);
      let kl = 0;
      for (let t = 0; t < a.length; ++t) if (a[t] > -Infinity) kl += Math.exp(a[t]) * (a[t] - b[t]);
      kls.push(kl);
      sameTop1 += argmax(a) === argmax(b);
    }
  }
}
const result = {model: modelPath, ctx: ctxLen, windows, ppl_all: Math.exp(nllAll / nAll),
                ppl_second_half: Math.exp(nllHalf / nHalf)};
if (base) {
  kls.sort((x, y) => x - y);
  result.kl_mean = kls.reduce((x, y) => x + y, 0) / kls.length;
  const rank = 0.99 * (kls.length - 1), lo = Math.floor(rank), hi = Math.min(lo + 1, kls.length - 1);
  result.kl_p99 = kls[lo] + (kls[hi] - kls[lo]) * (rank - lo);  // interpolated, as densa eval does
  result.same_top1 = sameTop1 / kls.length;
}
console.log(JSON.stringify(result));
process.exit(0);
