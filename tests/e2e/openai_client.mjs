// Drives a densa server with the official `openai` npm client and prints what it got as one
// JSON object (the gtest in openai_npm_test.cpp checks it). Usage:
//   node openai_client.mjs BASE_URL MODEL API_KEY PROMPT
import OpenAI from 'openai';

const [, , baseURL, model, apiKey, prompt] = process.argv;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const out = {};

const completion = await client.completions.create({ model, prompt, max_tokens: 48, temperature: 0 });
out.completion = { text: completion.choices[0].text, finish_reason: completion.choices[0].finish_reason, usage: completion.usage };

{
  const stream = await client.completions.create({
    model, prompt, max_tokens: 48, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    ++chunks;
    for (const c of chunk.choices) { text += c.text; if (c.finish_reason) finish = c.finish_reason; }
    if (chunk.usage) usage = chunk.usage;
  }
  out.completion_stream = { text, finish_reason: finish, usage, chunks };
}

const messages = [{ role: 'system', content: 'Tell stories.' }, { role: 'user', content: prompt }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0, logprobs: true, top_logprobs: 2 });
out.chat = {
  content: chat.choices[0].message.content, role: chat.choices[0].message.role,
  finish_reason: chat.choices[0].finish_reason, usage: chat.usage,
  logprobs_len: chat.choices[0].logprobs?.content?.length ?? -1,
};

{
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0, stream: true });
  let content = '', finish = null, role = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) content += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  out.chat_stream = { content, role, finish_reason: finish };
}

async function error_of(fn) {
  try { await fn(); return null; } catch (e) {
    return { status: e.status ?? null, type: e.type ?? null, param: e.param ?? null, code: e.code ?? null, name: e.constructor.name };
  }
}
out.error_bad_max_tokens = await error_of(() => client.completions.create({ model, prompt, max_tokens: 0 }));
out.error_unknown_model = await error_of(() => client.completions.create({ model: 'no-such-model', prompt, max_tokens: 4 }));
out.error_bad_key = await error_of(() =>
  new OpenAI({ baseURL, apiKey: 'wrong-key', maxRetries: 0 }).completions.create({ model, prompt, max_tokens: 4 }));
out.after_errors = (await client.completions.create({ model, prompt, max_tokens: 4, temperature: 0 })).choices[0].text;

const models = await client.models.list();
out.models = models.data.map((m) => m.id);

console.log(JSON.stringify(out));
