// Test oracle for tests/text: encodes JSON-string lines from stdin with an independent
// tokenizer and writes one JSON array of ids per line.
//   node tokenizer_oracle.cjs ORACLES_DIR hf TOKENIZER_JSON ADD_SPECIAL(0|1)
//       HF tokenizers (the Rust library through @anush008/tokenizers)
//   node tokenizer_oracle.cjs ORACLES_DIR tiktoken ENCODING(cl100k_base|o200k_base)
//       OpenAI tiktoken, special tokens allowed in the text
//   node tokenizer_oracle.cjs ORACLES_DIR tiktoken-ranks ENCODING OUT_FILE
//       writes the encoding's ranks as a tiktoken rank file ("base64 rank" lines) and its
//       special tokens and pattern as OUT_FILE.json
const path = require('path');
const fs = require('fs');
const readline = require('readline');

const [oracles, mode, arg, extra] = process.argv.slice(2);
const mod = (name) => require(path.join(path.resolve(oracles), 'node_modules', name));

async function main() {
  if (mode === 'tiktoken-ranks') {
    const data = mod(`tiktoken/encoders/${arg}.json`);
    // bpe_ranks: lines of "<marker> <first rank> <base64> <base64> ..." (consecutive ranks)
    const lines = [];
    for (const line of data.bpe_ranks.split('\n')) {
      if (!line) continue;
      const [, offset, ...tokens] = line.split(' ');
      let rank = parseInt(offset, 10);
      for (const t of tokens) lines.push(`${t} ${rank++}`);
    }
    fs.writeFileSync(extra, lines.join('\n') + '\n');
    fs.writeFileSync(extra + '.json', JSON.stringify({pat_str: data.pat_str, special_tokens: data.special_tokens}));
    return;
  }
  let encode;
  if (mode === 'hf') {
    const { Tokenizer } = mod('@anush008/tokenizers');
    const tok = Tokenizer.fromFile(arg);
    const add = extra === '1';
    encode = async (s) => Array.from((await tok.encode(s, null, { addSpecialTokens: add })).getIds());
  } else if (mode === 'tiktoken') {
    const { get_encoding } = mod('tiktoken');
    const enc = get_encoding(arg);
    encode = async (s) => Array.from(enc.encode(s, 'all'));
  } else {
    throw new Error('unknown mode ' + mode);
  }
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  const out = [];
  for await (const line of rl) {
    if (line === '') continue;
    out.push(JSON.stringify(await encode(JSON.parse(line))));
  }
  process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
}
main().catch((e) => { console.error(e); process.exit(1); });
