// Structured output through the official OpenAI Node SDK, checked with Ajv (an independent
// JSON Schema validator from npm): the tiny reference model, constrained, must answer JSON
// that conforms to the schema, greedy and sampled, plain and streamed; json_object mode gives
// an object; a schema keyword the server cannot enforce is a 400 naming it. Prints one JSON
// object; test_serve_choices.cpp (StructuredOutputThroughTheNodeSdk) checks it.
//   node openai_sdk_structured.mjs http://127.0.0.1:PORT/v1
import OpenAI from 'openai';
import Ajv from 'ajv';

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'none', maxRetries: 0, timeout: 300_000 });
const model = 'ref-qwen3-d256';
const messages = [{ role: 'user', content: 'Describe a person as JSON.' }];
const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    age: { type: 'integer' },
    colour: { enum: ['red', 'green', 'blue'] },
    height: { type: 'number' },
    tags: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 3 },
    pet: { anyOf: [{ type: 'null' }, { $ref: '#/$defs/pet' }] },
    ok: { type: 'boolean' },
  },
  required: ['name', 'age', 'colour', 'ok'],
  additionalProperties: false,
  $defs: { pet: { type: 'object', properties: { kind: { enum: ['cat', 'dog'] } }, required: ['kind'],
                  additionalProperties: false } },
};
const validate = new Ajv().compile(schema);
const response_format = { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } };
const out = { runs: [] };

const check = (label, content, finish) => {
  let parsed = null;
  let error = null;
  try {
    parsed = JSON.parse(content);
  } catch (e) {
    error = String(e);
  }
  const valid = parsed !== null && validate(parsed);
  out.runs.push({ label, content, finish, valid, error: error ?? (valid ? null : JSON.stringify(validate.errors)) });
};

for (const [temperature, seed] of [[0, 1], [1, 1], [1, 2], [1, 3]]) {
  const r = await client.chat.completions.create({ model, messages, temperature, seed, max_tokens: 200, response_format });
  check(`t=${temperature} seed=${seed}`, r.choices[0].message.content, r.choices[0].finish_reason);
}
const two = await client.chat.completions.create({ model, messages, temperature: 1, seed: 9, n: 2, max_tokens: 200,
                                                   response_format });
for (const c of two.choices) check(`n=2 choice ${c.index}`, c.message.content, c.finish_reason);
const stream = await client.chat.completions.create({ model, messages, temperature: 1, seed: 4, max_tokens: 200,
                                                      response_format, stream: true });
let text = '';
let finish = null;
for await (const chunk of stream) {
  text += chunk.choices[0]?.delta?.content ?? '';
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
check('stream', text, finish);

const obj = await client.chat.completions.create({ model, messages, temperature: 0, max_tokens: 300,
                                                   response_format: { type: 'json_object' } });
out.json_object = { content: obj.choices[0].message.content, finish: obj.choices[0].finish_reason };

try {
  await client.chat.completions.create({ model, messages, response_format: { type: 'json_schema', json_schema: {
    name: 'x', schema: { type: 'object', properties: { a: { type: 'string', format: 'email' } } } } } });
  out.unsupported = null;
} catch (e) {
  out.unsupported = { status: e.status, param: e.param ?? e.error?.param, code: e.code ?? e.error?.code };
}
console.log(JSON.stringify(out));
