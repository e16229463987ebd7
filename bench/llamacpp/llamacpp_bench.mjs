// llama.cpp's offline speed on this machine, measured the way `densa bench offline` measures
// densa, so the two can run in turn on the same minutes (bench/llamacpp/compare.sh).
//
// llama.cpp comes from the npm registry as node-llama-cpp's prebuilt CPU binaries: upstream
// llama.cpp (see the printed build metadata) with ggml's per-CPU variants, of which the loader
// picks the best for this CPU (on Sapphire / Emerald Rapids the AVX-512 + VNNI + BF16 + AMX-INT8
// one, with Q4_0 / Q8_0 weights repacked into its AMX buffer).
//
// One run = `--batch` sequences of `--prompt-len` random token ids (ids >= 260, past a
// `--tokenizer bytes` file's special and byte tokens), submitted together:
//   prefill: from submitting the prompts until every sequence has its first token (greedy);
//   decode:  the next `--gen-len - 1` tokens of every sequence, each fed back as llama.cpp's
//            server does. decode tok/s = batch * (gen-len - 1) / (last sequence done - last
//            first token).
// The median of `--repeats` runs is reported, after one short untimed warm-up run (densa's
// bench offline has none).
//
// Usage: node llamacpp_bench.mjs -m MODEL.gguf [--batch B] [--prompt-len P] [--gen-len G]
//          [--repeats R] [--threads T] [--kv-dtype f16|q8_0|bf16] [--ubatch U] [--seed S] [--json OUT]
import {getLlama} from "node-llama-cpp";
import {readFileSync, writeFileSync} from "node:fs";
import {cpus} from "node:os";

function parseArgs(argv) {
  const a = {model: "", batch: 1, promptLen: 128, genLen: 32, repeats: 3, threads: 0, kv: "f16", ubatch: 512,
             seed: 0, json: ""};
  const flags = {"-m": "model", "--model": "model", "--batch": "batch", "--prompt-len": "promptLen",
                 "--gen-len": "genLen", "--repeats": "repeats", "--threads": "threads", "--kv-dtype": "kv",
                 "--ubatch": "ubatch", "--seed": "seed", "--json": "json"};
  for (let i = 0; i < argv.length; i += 2) {
    const key = flags[argv[i]];
    if (!key || i + 1 >= argv.length) throw new Error(`unknown or incomplete flag '${argv[i]}'`);
    a[key] = typeof a[key] === "number" ? Number(argv[i + 1]) : argv[i + 1];
    if (typeof a[key] === "number" && !Number.isInteger(a[key])) throw new Error(`${argv[i]}: not an integer`);
  }
  if (!a.model) throw new Error("-m MODEL is required");
  if (a.batch < 1 || a.promptLen < 1 || a.genLen < 2 || a.repeats < 1) {
    throw new Error("need --batch >= 1, --prompt-len >= 1, --gen-len >= 2, --repeats >= 1");
  }
  if (!["f16", "q8_0", "bf16"].includes(a.kv)) throw new Error(`--kv-dtype ${a.kv}: expected f16, q8_0 or bf16`);
  if (a.threads === 0) a.threads = cpus().length;
  return a;
}

// A small deterministic generator (xorshift32), so both engines can be fed comparable prompts.
function promptIds(seed, n, vocab) {
  let s = (seed * 2654435761 + 12345) >>> 0 || 1;
  const ids = [];
  for (let i = 0; i < n; ++i) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    ids.push(260 + (s % (vocab - 260)));
  }
  return ids;
}

const median = (xs) => {
  const v = [...xs].sort((p, q) => p - q);
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};

async function oneRun(seqs, prompts, genLen) {
  const start = performance.now();
  const firstAt = [], doneAt = [];
  await Promise.all(seqs.map(async (seq, i) => {
    const it = seq.evaluate(prompts[i], {temperature: 0});
    let got = 0;
    for await (const _token of it) {
      ++got;
      if (got === 1) firstAt[i] = performance.now();
      if (got === genLen) break;
    }
    if (got !== genLen) throw new Error(`sequence ${i} stopped after ${got} of ${genLen} tokens`);
    doneAt[i] = performance.now();
  }));
  const prefillS = (Math.max(...firstAt) - start) / 1000;
  const decodeS = (Math.max(...doneAt) - Math.max(...firstAt)) / 1000;
  return {prefill_s: prefillS, decode_s: decodeS};
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const llama = await getLlama({gpu: false, build: "never", maxThreads: a.threads, logLevel: "error"});
  const meta = JSON.parse(readFileSync(new URL("node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/_nlcBuildMetadata.json",
                                               import.meta.url)));
  const model = await llama.loadModel({modelPath: a.model, gpuLayers: 0});
  const meta_kv = model.fileInfo.metadata;
  const nVocab = meta_kv[meta_kv.general.architecture]?.vocab_size ?? meta_kv.tokenizer.ggml.tokens.length;
  const kvType = a.kv.toUpperCase();
  const ctx = await model.createContext({
    // contextSize is per sequence: node-llama-cpp gives every sequence its own KV stream
    // (llama.cpp's kv_unified = false), so a token attends only its own sequence's cells.
    sequences: a.batch, contextSize: a.promptLen + a.genLen + 16, batchSize: a.ubatch,
    threads: {ideal: a.threads, min: a.threads}, flashAttention: true,
    experimentalKvCacheKeyType: kvType, experimentalKvCacheValueType: kvType, ignoreMemorySafetyChecks: true,
  });
  const seqs = [];
  for (let i = 0; i < a.batch; ++i) seqs.push(ctx.getSequence());
  const prompts = seqs.map((_, i) => promptIds(a.seed * 1000003 + i, a.promptLen, nVocab));
  // One short untimed run first (16-token prompts, 2 tokens each): threads and buffers warm.
  await oneRun(seqs, prompts.map((p) => p.slice(0, Math.min(16, p.length))), 2);
  const runs = [];
  for (let r = 0; r < a.repeats; ++r) {
    for (const s of seqs) await s.clearHistory();
    const run = await oneRun(seqs, prompts, a.genLen);
    run.prefill_tok_s = a.batch * a.promptLen / run.prefill_s;
    run.decode_tokens = a.batch * (a.genLen - 1);
    run.decode_tok_s = run.decode_tokens / run.decode_s;
    runs.push(run);
  }
  const report = {
    engine: "llama.cpp", llama_cpp_release: meta.buildOptions.llamaCpp.release,
    node_llama_cpp: JSON.parse(readFileSync(new URL("node_modules/node-llama-cpp/package.json", import.meta.url))).version,
    cpu_features: llama.systemInfo.trim(), model: a.model, kv_dtype: a.kv, flash_attention: true, batch: a.batch,
    prompt_len: a.promptLen, gen_len: a.genLen, repeats: a.repeats, threads: a.threads, ubatch: a.ubatch,
    prefill_tok_s: median(runs.map((r) => r.prefill_tok_s)), decode_tok_s: median(runs.map((r) => r.decode_tok_s)),
    decode_step_ms: median(runs.map((r) => r.decode_s * 1000 / (a.genLen - 1))), runs,
  };
  console.log(`llama.cpp ${report.llama_cpp_release} (node-llama-cpp ${report.node_llama_cpp}), ${a.threads} threads, ` +
              `KV ${a.kv}, batch ${a.batch}, prompt ${a.promptLen}, gen ${a.genLen}, ${a.repeats} runs`);
  console.log(`prefill: ${report.prefill_tok_s.toFixed(1)} tok/s`);
  console.log(`decode:  ${report.decode_tok_s.toFixed(2)} tok/s aggregate, ${report.decode_step_ms.toFixed(2)} ms/step`);
  if (a.json) writeFileSync(a.json, JSON.stringify(report, null, 2) + "\n");
  await ctx.dispose();
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => {
  console.error(`llamacpp_bench: ${e.message}`);
  process.exit(1);
});
