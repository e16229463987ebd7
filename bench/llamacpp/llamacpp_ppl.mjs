// llama.cpp's perplexity of a GGUF on token ids, windowed like densa's tools/perplexity.h
// (non-overlapping windows of --ctx tokens, the first replaced by BOS, each window from
// position 0 on a fresh sequence, NLL from a double log-softmax of the fp32 logits), through
// node-llama-cpp's prebuilt CPU llama.cpp (bench/llamacpp/install.sh first).
// Usage: node llamacpp_ppl.mjs MODEL.gguf IDS.u16.bin CTX [MAX_WINDOWS]  -> one JSON line
import {readFileSync} from "node:fs";
import {getLlama} from "node-llama-cpp";

const [modelPath, idsPath, ctxArg, maxArg] = process.argv.slice(2);
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

const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const bos = model.tokens.bos ?? 1;
const context = await model.createContext({contextSize: ctxLen + 8, batchSize: ctxLen, threads: 2});
const seq = context.getSequence();
let nllAll = 0, nAll = 0, nllHalf = 0, nHalf = 0;
for (let w = 0; w < windows; ++w) {
  const win = ids.slice(w * ctxLen, (w + 1) * ctxLen);
  win[0] = bos;
  await seq.clearHistory();
  const out = await seq.controlledEvaluate(win.map((t) => [t, {generateNext: {logits: true}}]));
  for (let i = 0; i + 1 < ctxLen; ++i) {
    const lp = logSoftmaxAt(out[i].next.logits, win[i + 1]);
    nllAll -= lp; ++nAll;
    if (i >= ctxLen / 2) { nllHalf -= lp; ++nHalf; }
  }
}
console.log(JSON.stringify({model: modelPath, ctx: ctxLen, windows, ppl_all: Math.exp(nllAll / nAll),
                            ppl_second_half: Math.exp(nllHalf / nHalf)}));
process.exit(0);
