// Tool calling through the official OpenAI Node SDK, checked with Ajv: the tiny reference model
// will not choose a tool by itself, so tool_choice forces one (a named function, then
// "required"); constrained sampling makes its arguments valid for the tool's schema. The calls
// then go back as an assistant message with tool_calls plus a tool message, and the server
// answers the round trip. Plain and streamed (the SDK's deltas accumulated by index). Prints one
// JSON object; test_serve_choices.cpp (ToolCallsThroughTheNodeSdk) checks it.
//   node openai_sdk_tools.mjs http://127.0.0.1:PORT/v1
import OpenAI from 'openai';
import Ajv from 'ajv';

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 300_000 });
const model = 'ref-qwen3-d256';
const weather = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer' },
                unit: { enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const time = { type: 'object', properties: { zone: { type: 'string', maxLength: 8 } }, required: ['zone'],
               additionalProperties: false };
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: weather } },
  { type: 'function', function: { name: 'get_time', description: 'Time in a zone', parameters: time } },
];
const ajv = new Ajv();
const validators = { get_weather: ajv.compile(weather), get_time: ajv.compile(time) };
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
const named = { type: 'function', function: { name: 'get_weather' } };
const out = { runs: [] };

const check = (label, calls, finish, content) => {
  const rows = (calls ?? []).map((c) => {
    let args = null;
    let error = null;
    try {
      args = JSON.parse(c.function.arguments);
    } catch (e) {
      error = String(e);
    }
    const v = validators[c.function.name];
    const valid = args !== null && v !== undefined && v(args);
    return { id: c.id, type: c.type, name: c.function.name, arguments: c.function.arguments, valid,
             error: error ?? (valid ? null : JSON.stringify(v?.errors ?? 'not a tool')) };
  });
  out.runs.push({ label, calls: rows, finish, content: content ?? null });
};

const streamed = async (params) => {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  const calls = [];
  let finish = null;
  let content = '';
  let fragments = 0;
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta ?? {};
    content += d.content ?? '';
    for (const t of d.tool_calls ?? []) {
      if (!calls[t.index]) calls[t.index] = { id: t.id, type: t.type, function: { name: '', arguments: '' } };
      const c = calls[t.index];
      if (t.id) c.id = t.id;
      if (t.function?.name) c.function.name += t.function.name;
      if (t.function?.arguments) {
        c.function.arguments += t.function.arguments;
        ++fragments;
      }
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  return { calls, finish, content, fragments };
};

const base = { model, messages, tools, temperature: 0, max_tokens: 120 };
const a = await client.chat.completions.create({ ...base, tool_choice: named });
check('named', a.choices[0].message.tool_calls, a.choices[0].finish_reason, a.choices[0].message.content);
// parallel_tool_calls false: an array of one call, so the reply closes within max_tokens whatever
// the sampled arguments are (with parallel calls a small model may keep adding calls).
const r = await client.chat.completions.create({ ...base, tool_choice: 'required', parallel_tool_calls: false,
                                                   temperature: 1, seed: 3 });
check('required', r.choices[0].message.tool_calls, r.choices[0].finish_reason, r.choices[0].message.content);

const s = await streamed({ ...base, tool_choice: named, temperature: 1, seed: 5 });
check('named stream', s.calls, s.finish, s.content);
out.named_stream_fragments = s.fragments;
const sr = await streamed({ ...base, tool_choice: 'required', parallel_tool_calls: false, temperature: 1, seed: 6 });
check('required stream', sr.calls, sr.finish, sr.content);

// The round trip: the call and its result go back; the model answers (auto: it may call again).
const call = a.choices[0].message.tool_calls[0];
const followup = [...messages, { role: 'assistant', content: null, tool_calls: [call] },
                  { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: 14, sky: 'rain' }) }];
const back = await client.chat.completions.create({ model, messages: followup, tools, temperature: 0, max_tokens: 24 });
out.round_trip = { finish: back.choices[0].finish_reason, content: back.choices[0].message.content,
                   prompt_tokens: back.usage.prompt_tokens, first_prompt_tokens: a.usage.prompt_tokens };

try {
  await client.chat.completions.create({ ...base, tool_choice: { type: 'function', function: { name: 'nope' } } });
  out.unknown = null;
} catch (e) {
  out.unknown = { status: e.status, param: e.param ?? e.error?.param };
}
console.log(JSON.stringify(out));
