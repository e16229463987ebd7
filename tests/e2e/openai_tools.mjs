// Tool calls and structured outputs through the official `openai` client against densa serve
// (tests/e2e/tools_e2e_test.cpp). Arguments and answers are checked with ajv, an independent
// JSON Schema validator (the test oracles). Prints one JSON object of results.
//   node openai_tools.mjs BASE_URL ORACLES_DIR REQUESTS [MODEL [PAIRS]]
// MODEL: the served model name (default qwen-random); PAIRS: how many streamed / whole pairs
// of the same seed run at once (default min(REQUESTS, 24)).
import OpenAI from 'openai';
import { createRequire } from 'module';

const [baseURL, oraclesDir, requestsArg, modelArg, pairsArg] = process.argv.slice(2);
const require = createRequire(oraclesDir.replace(/\/?$/, '/') + 'package.json');
const Ajv = require('ajv');
const ajv = new Ajv({ strict: false });
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0 });
const model = modelArg || 'qwen-random';
const N = parseInt(requestsArg, 10);
const PAIRS = pairsArg ? parseInt(pairsArg, 10) : Math.min(N, 24);

// Strings are length-bounded so random weights finish them within max_tokens.
const weather = { type: 'function', function: { name: 'get_weather', description: 'Weather for a city',
  parameters: { type: 'object', properties: {
    city: { type: 'string', maxLength: 6 },
    days: { type: 'integer', minimum: 1, maximum: 14 },
    units: { enum: ['c', 'f'] } }, required: ['city', 'days'], additionalProperties: false } } };
const booking = { type: 'function', function: { name: 'book', description: 'Book a trip',
  parameters: { type: 'object', properties: {
    who: { type: 'object', properties: { name: { type: 'string', maxLength: 5 }, vip: { type: 'boolean' } },
           required: ['name', 'vip'], additionalProperties: false },
    legs: { type: 'array', minItems: 1, maxItems: 2,
            items: { type: 'object', properties: { from: { type: 'string', maxLength: 4 }, hops: { type: 'integer', minimum: 0, maximum: 3 } },
                     required: ['from', 'hops'], additionalProperties: false } },
    class: { anyOf: [{ enum: ['eco', 'biz'] }, { type: 'null' }] } },
    required: ['who', 'legs', 'class'], additionalProperties: false } } };
const tools = [weather, booking];
const schemaOf = Object.fromEntries(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
const answerSchema = { type: 'object', properties: {
  ok: { type: 'boolean' }, n: { type: 'integer', minimum: -5, maximum: 5 },
  tags: { type: 'array', maxItems: 3, items: { enum: ['a', 'b', 'c'] } },
  inner: { $ref: '#/$defs/inner' } }, required: ['ok', 'n', 'tags', 'inner'], additionalProperties: false,
  $defs: { inner: { type: 'object', properties: { s: { type: 'string', maxLength: 4 } }, required: ['s'], additionalProperties: false } } };
const validAnswer = ajv.compile(answerSchema);

function checkCalls(calls) {
  const problems = [];
  for (const c of calls ?? []) {
    let args;
    try { args = JSON.parse(c.function.arguments); } catch (e) { problems.push(`unparsable arguments ${c.function.arguments}`); continue; }
    const v = schemaOf[c.function.name];
    if (!v) { problems.push(`unknown tool ${c.function.name}`); continue; }
    if (!v(args)) problems.push(`${c.function.name} ${c.function.arguments}: ${ajv.errorsText(v.errors)}`);
    if (!c.id) problems.push('call without id');
  }
  return problems;
}

// A streamed answer folded into one message, as an OpenAI client folds it.
async function streamed(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  const msg = { content: '', tool_calls: [] };
  let finish = null, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) {
      const d = ch.delta ?? {};
      if (d.content) msg.content += d.content;
      for (const t of d.tool_calls ?? []) {
        const slot = (msg.tool_calls[t.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
        if (t.id) slot.id = t.id;
        if (t.function?.name) slot.function.name = t.function.name;
        if (t.function?.arguments) slot.function.arguments += t.function.arguments;
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { msg, finish, usage };
}

const out = { loop: {}, required: { total: 0, calls: 0, problems: [] }, named: { total: 0, problems: [] },
              schema: { total: 0, valid: 0, problems: [] }, stream_equal: { total: 0, equal: 0, diffs: [] } };

// 1. The full tool loop, non-streaming and streaming: call, tool result, final answer.
const user = { role: 'user', content: 'What is the weather in Oslo for 3 days?' };
for (const mode of ['blocking', 'stream']) {
  const params = { model, messages: [user], tools, tool_choice: 'required', parallel_tool_calls: false, temperature: 1, seed: 7, max_tokens: 160 };
  const first = mode === 'blocking' ? await client.chat.completions.create(params) : await streamed(params);
  const msg = mode === 'blocking' ? first.choices[0].message : first.msg;
  const finish = mode === 'blocking' ? first.choices[0].finish_reason : first.finish;
  const calls = msg.tool_calls ?? [];
  const messages = [user, { role: 'assistant', content: msg.content || null, tool_calls: calls },
                    ...calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: JSON.stringify({ temp_c: 4 }) }))];
  const final = await client.chat.completions.create({ model, messages, tools, tool_choice: 'none', temperature: 0, max_tokens: 8 });
  out.loop[mode] = { finish, calls: calls.length, problems: checkCalls(calls),
                     final_finish: final.choices[0].finish_reason, final_has_calls: !!final.choices[0].message.tool_calls,
                     final_prompt_tokens: final.usage.prompt_tokens };
}

// 2. Schema accuracy: tool_choice required and named, and response_format json_schema, at
// temperature 1 over many seeds.
// Run at most 64 at a time (the server runs 32), so thousands of requests do not all hold a
// connection open at once.
const jobs = [];
for (let i = 0; i < N; ++i) {
  jobs.push((async () => {
    const r = await client.chat.completions.create({ model, messages: [user], tools, tool_choice: 'required',
                                                     parallel_tool_calls: false, temperature: 1, seed: 1000 + i, max_tokens: 200 });
    out.required.total++;
    const calls = r.choices[0].message.tool_calls ?? [];
    out.required.calls += calls.length;
    if (calls.length === 0) out.required.problems.push(`seed ${1000 + i}: no call: ${JSON.stringify(r.choices[0])}`);
    if (r.choices[0].finish_reason !== 'tool_calls') out.required.problems.push(`seed ${1000 + i}: finish ${r.choices[0].finish_reason}`);
    out.required.problems.push(...checkCalls(calls));
  }));
  jobs.push((async () => {
    const r = await client.chat.completions.create({ model, messages: [user], tools, temperature: 1, seed: 5000 + i, max_tokens: 200, parallel_tool_calls: false,
                                                     tool_choice: { type: 'function', function: { name: 'book' } } });
    out.named.total++;
    const calls = r.choices[0].message.tool_calls ?? [];
    if (calls.length === 0 || calls.some((c) => c.function.name !== 'book')) out.named.problems.push(`seed ${5000 + i}: ${JSON.stringify(calls)}`);
    out.named.problems.push(...checkCalls(calls));
  }));
  jobs.push((async () => {
    const r = await client.chat.completions.create({ model, messages: [user], temperature: 1, seed: 9000 + i, max_tokens: 200,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', strict: true, schema: answerSchema } } });
    out.schema.total++;
    const text = r.choices[0].message.content;
    try {
      if (validAnswer(JSON.parse(text))) out.schema.valid++;
      else out.schema.problems.push(`${text}: ${ajv.errorsText(validAnswer.errors)}`);
    } catch (e) { out.schema.problems.push(`unparsable: ${text} (finish ${r.choices[0].finish_reason})`); }
  }));
}
let next = 0;
await Promise.all(Array.from({ length: 64 }, async () => { while (next < jobs.length) await jobs[next++](); }));

// 3. Streaming equals non-streaming for the same seed, all pairs at once. First let the
// server close the idle keep-alive connections of part 2 (its timeout is 2 s), so that no
// request of this part goes out on a connection the server is closing at that moment.
await new Promise((done) => setTimeout(done, 3000));
const pairs = [];
for (let i = 0; i < PAIRS; ++i) {
  pairs.push((async () => {
    const params = { model, messages: [user], tools, tool_choice: i % 2 ? 'required' : 'auto', temperature: 1, seed: 300 + i, max_tokens: 120 };
    const [whole, parts] = await Promise.all([client.chat.completions.create(params), streamed(params)]);
    const w = whole.choices[0].message;
    const a = JSON.stringify({ content: w.content ?? '', calls: (w.tool_calls ?? []).map((c) => [c.id, c.function.name, c.function.arguments]), finish: whole.choices[0].finish_reason });
    const b = JSON.stringify({ content: parts.msg.content, calls: parts.msg.tool_calls.map((c) => [c.id, c.function.name, c.function.arguments]), finish: parts.finish });
    out.stream_equal.total++;
    if (a === b) out.stream_equal.equal++;
    else out.stream_equal.diffs.push({ seed: 300 + i, whole: a, streamed: b });
  })());
}
await Promise.all(pairs);
console.log(JSON.stringify(out));
