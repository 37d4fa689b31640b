// The official OpenAI Node SDK against `ninfer serve`: chat and completions, plain and
// streamed, /v1/models, n = 2, logprobs, a list of prompts, a bad n, a prompt over the
// context and a wrong key. Prints one JSON object with what it saw; test_serve_e2e.cpp
// (OfficialOpenAiNodeSdk) checks it.
//   node openai_sdk_client.mjs http://127.0.0.1:PORT/v1 API_KEY
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 300_000 });
const model = 'ref-qwen3-d256';
const messages = [{ role: 'user', content: 'The secret number for Alice is 4821. What is the secret number for Alice?' }];
const out = {};

const chat = await client.chat.completions.create({ model, messages, temperature: 0, max_tokens: 40 });
out.chat = chat.choices[0].message.content;
out.chat_finish = chat.choices[0].finish_reason;
out.chat_usage = chat.usage;

const stream = await client.chat.completions.create({
  model, messages, temperature: 0, max_tokens: 40, stream: true, stream_options: { include_usage: true },
});
out.chat_stream = '';
for await (const chunk of stream) {
  if (chunk.choices.length > 0) {
    out.chat_stream += chunk.choices[0].delta?.content ?? '';
    if (chunk.choices[0].finish_reason) out.chat_stream_finish = chunk.choices[0].finish_reason;
  }
  if (chunk.usage) out.chat_stream_usage = chunk.usage;
}

const comp = await client.completions.create({ model, prompt: 'The secret number', max_tokens: 12, temperature: 0 });
out.completion = comp.choices[0].text;
out.completion_finish = comp.choices[0].finish_reason;
const cstream = await client.completions.create({
  model, prompt: 'The secret number', max_tokens: 12, temperature: 0, stream: true,
});
out.completion_stream = '';
for await (const chunk of cstream) out.completion_stream += chunk.choices[0]?.text ?? '';

out.models = [];
for await (const m of client.models.list()) out.models.push(m.id);

const n2 = await client.chat.completions.create({ model, messages, n: 2, max_tokens: 8, seed: 1 });
out.n2_choices = n2.choices.length;
out.n2_indices = n2.choices.map((c) => c.index);

const lp = await client.chat.completions.create({
  model, messages, temperature: 0, max_tokens: 40, logprobs: true, top_logprobs: 2,
});
out.chat_logprobs_tokens = lp.choices[0].logprobs.content.length;
out.chat_logprobs_joined = lp.choices[0].logprobs.content.map((e) => e.token).join('');
out.chat_top_logprobs = lp.choices[0].logprobs.content[0].top_logprobs.length;

const list = await client.completions.create({
  model, prompt: ['The secret number', 'Hello'], max_tokens: 12, temperature: 0,
});
out.completion_list_choices = list.choices.length;
out.completion_list_first = list.choices.find((c) => c.index === 0).text;

const failure = async (fn) => {
  try {
    await fn();
    return null;
  } catch (e) {
    return { status: e.status, param: e.param ?? e.error?.param, code: e.code ?? e.error?.code, message: e.message };
  }
};
out.n99_error = await failure(() => client.chat.completions.create({ model, messages, n: 99 }));
out.context_error = await failure(() =>
  client.completions.create({ model, prompt: 'many words here '.repeat(400), max_tokens: 4 }));

try {
  await new OpenAI({ baseURL, apiKey: 'wrong-key', maxRetries: 0 }).models.list();
  out.bad_key_status = 200;
} catch (e) {
  out.bad_key_status = e.status;
}

console.log(JSON.stringify(out));
