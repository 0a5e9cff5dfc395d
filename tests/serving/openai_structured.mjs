// Tool calls, reasoning, structured outputs, logit_bias and chat templates through the
// real `openai` npm client, against memra-host serving the random-weight test model
// under two templates: "qwen" (Qwen3's own chat template, --chat-template) and "think"
// (a template whose prompt opens the model's thinking, as DeepSeek-R1's does).
// Oracles: @huggingface/jinja renders the same templates (prompt token counts must
// match), ajv validates every constrained output against its schema, and the client's
// own stream accumulation must equal the whole answer.
//   node openai_structured.mjs BASE_URL QWEN_TEMPLATE THINK_TEMPLATE   (MEMRA_NODE_DIR set)
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [baseURL, qwenTemplatePath, thinkTemplatePath] = process.argv.slice(2);
const nodeDir = process.env.MEMRA_NODE_DIR;
assert.ok(baseURL && qwenTemplatePath && thinkTemplatePath && nodeDir, "usage: BASE_URL QWEN_TEMPLATE THINK_TEMPLATE");
const load = (p) => import(pathToFileURL(path.join(nodeDir, "node_modules", p)).href);
const { default: OpenAI } = await load("openai/index.mjs");
const { Template } = await load("@huggingface/jinja/dist/index.js");
const { default: Ajv } = await load("ajv/dist/2020.js");
const ajv = new Ajv({ strict: false });

const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 120_000 });
const root = baseURL.replace(/\/v1$/, "");
const qwenTemplate = new Template(fs.readFileSync(qwenTemplatePath, "utf8"));
const hello = [{ role: "user", content: "What is the weather in Paris?" }];
const SEEDS = [1, 2, 3, 4, 5, 6, 7, 8];

async function post(route, body) {
  const r = await fetch(root + route, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

// What the reference renderer makes of a chat, as memra's prompt_tokens must count it.
async function oracleTokens(context) {
  const text = qwenTemplate.render({ bos_token: "", eos_token: "<|im_end|>", add_generation_prompt: true, ...context });
  const r = await post("/tokenize", { model: "qwen", prompt: text, add_special_tokens: false });
  assert.equal(r.status, 200);
  return r.body.count;
}

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather of a city",
    strict: true,
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", maxLength: 12 },
        unit: { enum: ["celsius", "fahrenheit"] },
        days: { type: "integer" },
      },
      required: ["city", "unit", "days"],
      additionalProperties: false,
    },
  },
};
const timeTool = {
  type: "function",
  function: {
    name: "get_time",
    description: "Local time of a time zone",
    strict: true,
    parameters: { type: "object", properties: { zone: { type: "string", maxLength: 8 } }, required: ["zone"], additionalProperties: false },
  },
};

test("chat_template_kwargs and reasoning_effort reach the template as the reference renders them", async () => {
  for (const [kwargs, effort, oracle] of [
    [undefined, undefined, {}],
    [{ enable_thinking: false }, undefined, { enable_thinking: false }],
    [undefined, "none", { enable_thinking: false, reasoning_effort: "none" }],
  ]) {
    const r = await client.chat.completions.create({
      model: "qwen", messages: hello, max_tokens: 1, temperature: 0,
      ...(kwargs ? { chat_template_kwargs: kwargs } : {}), ...(effort ? { reasoning_effort: effort } : {}),
    });
    assert.equal(r.usage.prompt_tokens, await oracleTokens({ messages: hello, ...oracle }), JSON.stringify(oracle));
  }
  const off = await oracleTokens({ messages: hello, enable_thinking: false });
  assert.ok(off > (await oracleTokens({ messages: hello })), "enable_thinking false adds the empty think block");
});

test("tools and tool results are rendered by the model's own template", async () => {
  const r = await client.chat.completions.create({ model: "qwen", messages: hello, tools: [weatherTool, timeTool], max_tokens: 1, temperature: 0 });
  assert.equal(r.usage.prompt_tokens, await oracleTokens({ messages: hello, tools: [weatherTool, timeTool] }));
  // A turn that called a tool and its result, sent back.
  const args = { city: "Paris", unit: "celsius", days: 1 };
  const convo = [
    ...hello,
    { role: "assistant", content: null, tool_calls: [{ id: "call_7", type: "function", function: { name: "get_weather", arguments: JSON.stringify(args) } }] },
    { role: "tool", tool_call_id: "call_7", content: "{\"temp\": 21}" },
  ];
  const back = await client.chat.completions.create({ model: "qwen", messages: convo, tools: [weatherTool], max_tokens: 1, temperature: 0 });
  // Hugging Face templates receive the arguments as an object and the tool's name.
  const oracleConvo = [
    ...hello,
    { role: "assistant", content: "", tool_calls: [{ id: "call_7", type: "function", function: { name: "get_weather", arguments: args } }] },
    { role: "tool", tool_call_id: "call_7", name: "get_weather", content: "{\"temp\": 21}" },
  ];
  assert.equal(back.usage.prompt_tokens, await oracleTokens({ messages: oracleConvo, tools: [weatherTool] }));
  // tool_choice none: the tools are not offered.
  const none = await client.chat.completions.create({ model: "qwen", messages: hello, tools: [weatherTool], tool_choice: "none", max_tokens: 1, temperature: 0 });
  assert.equal(none.usage.prompt_tokens, await oracleTokens({ messages: hello }));
});

test("tool_choice required: well-formed calls matching the schema, finish_reason tool_calls, on every seed", async () => {
  const validate = ajv.compile(weatherTool.function.parameters);
  const validateTime = ajv.compile(timeTool.function.parameters);
  let calls = 0;
  for (const seed of SEEDS) {
    const r = await client.chat.completions.create({
      model: "qwen", messages: hello, tools: [weatherTool, timeTool], tool_choice: "required",
      temperature: 1, seed, max_tokens: 600,
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, "tool_calls", `seed ${seed}: ${JSON.stringify(c.message)}`);
    assert.ok(c.message.tool_calls.length >= 1);
    assert.equal(c.message.content, null);
    for (const call of c.message.tool_calls) {
      assert.match(call.id, /^call_/);
      assert.equal(call.type, "function");
      const a = JSON.parse(call.function.arguments);
      const v = call.function.name === "get_weather" ? validate : validateTime;
      assert.ok(["get_weather", "get_time"].includes(call.function.name), call.function.name);
      assert.ok(v(a), `seed ${seed}: ${call.function.arguments} ${JSON.stringify(v.errors)}`);
      calls++;
    }
  }
  assert.ok(calls >= SEEDS.length);
});

test("a named tool_choice without parallel calls: exactly that one call; parse() parses its arguments", async () => {
  for (const seed of SEEDS.slice(0, 4)) {
    const r = await client.chat.completions.parse({
      model: "qwen", messages: hello, tools: [weatherTool, timeTool],
      tool_choice: { type: "function", function: { name: "get_time" } }, parallel_tool_calls: false,
      temperature: 1, seed, max_tokens: 400,
    });
    const calls = r.choices[0].message.tool_calls;
    assert.equal(calls.length, 1);
    assert.equal(calls[0].function.name, "get_time");
    assert.deepEqual(calls[0].function.parsed_arguments, JSON.parse(calls[0].function.arguments));
    assert.equal(typeof calls[0].function.parsed_arguments.zone, "string");
  }
});

test("streamed tool calls: the client's accumulation equals the whole answer, argument parts arriving before each call ends", async () => {
  for (const seed of SEEDS.slice(0, 4)) {
    const params = { model: "qwen", messages: hello, tools: [weatherTool, timeTool], tool_choice: "required", temperature: 1, seed, max_tokens: 600 };
    const whole = await client.chat.completions.create(params);
    const stream = client.chat.completions.stream({ ...params, stream: true });
    const chunks = [];
    const parts = [], done = [];  // per call index: argument parts seen before the client ended the call; its arguments then
    stream.on("chunk", (c) => chunks.push(c));
    stream.on("tool_calls.function.arguments.delta", (e) => {
      assert.equal(done[e.index], undefined, "an argument part after the call ended");
      if (e.arguments_delta) parts[e.index] = (parts[e.index] ?? 0) + 1;
    });
    stream.on("tool_calls.function.arguments.done", (e) => { done[e.index] = e.arguments; });
    const final = await stream.finalChatCompletion();
    whole.choices[0].message.tool_calls.forEach((c, i) => {
      assert.ok(parts[i] > 1, `seed ${seed}: call ${i}'s arguments came in ${parts[i]} part(s)`);
      assert.deepEqual(JSON.parse(done[i]), JSON.parse(c.function.arguments));
    });
    const got = final.choices[0];
    assert.equal(got.finish_reason, "tool_calls");
    const strip = (calls) => calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments }));
    assert.deepEqual(strip(got.message.tool_calls), strip(whole.choices[0].message.tool_calls), `seed ${seed}`);
    // Each call: index, id and name first, then its arguments.
    const firsts = chunks.flatMap((c) => c.choices.flatMap((x) => x.delta?.tool_calls ?? [])).filter((t) => t.id);
    assert.equal(firsts.length, got.message.tool_calls.length);
    for (const t of firsts) assert.equal(t.function.arguments, "");
  }
});

test("response_format json_schema: valid on every seed, streamed equals whole, parse() fills parsed", async () => {
  const schema = {
    type: "object",
    properties: {
      name: { type: "string", maxLength: 16 },
      age: { type: "integer" },
      tags: { type: "array", items: { type: "string", maxLength: 6 }, maxItems: 3 },
      ok: { type: "boolean" },
      kind: { enum: ["a", "b", null] },
      when: { type: "string", format: "date" },
    },
    required: ["name", "age", "tags", "ok", "kind", "when"],
    additionalProperties: false,
  };
  const validate = ajv.compile(schema);
  const response_format = { type: "json_schema", json_schema: { name: "person", schema, strict: true } };
  for (const seed of SEEDS) {
    const params = { model: "qwen", messages: hello, response_format, temperature: 1, seed, max_tokens: 500 };
    const r = await client.chat.completions.parse(params);
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, "stop", `seed ${seed}: ${m.content}`);
    const doc = JSON.parse(m.content);
    assert.ok(validate(doc), `seed ${seed}: ${m.content} ${JSON.stringify(validate.errors)}`);
    assert.deepEqual(m.parsed, doc);
    const stream = await client.chat.completions.create({ ...params, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    assert.equal(text, m.content, `seed ${seed}`);
  }
});

// Independent checks for the formats (ajv-formats is not installed; node's own net module
// and Date do the work, not the grammar's regexes).
const two = (s, a) => Number(s.slice(a, a + 2));
function isDate(s) {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  if (!m) return false;
  const d = new Date(0);
  d.setUTCFullYear(+m[1], +m[2] - 1, +m[3]);
  return d.getUTCFullYear() === +m[1] && d.getUTCMonth() === +m[2] - 1 && d.getUTCDate() === +m[3];
}
function isTime(s) {
  const m = /^(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/.exec(s);
  if (!m || +m[1] > 23 || +m[2] > 59 || +m[3] > 59) return false;
  return m[5].length === 1 || (two(m[5], 1) <= 23 && two(m[5], 4) <= 59);
}
const isLabel = (l) => l.length >= 1 && l.length <= 63 && /^[A-Za-z0-9-]+$/.test(l) && !l.startsWith("-") && !l.endsWith("-");
const isHostname = (s) => s.length <= 253 && s.split(".").every(isLabel);
function isEmail(s) {
  const at = s.lastIndexOf("@");
  const local = s.slice(0, at), domain = s.slice(at + 1);
  return at > 0 && local.length <= 64 && local.split(".").every((a) => /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+$/.test(a)) &&
    isHostname(domain) && domain.includes(".");
}
const formatChecks = {
  date: isDate,
  time: isTime,
  "date-time": (s) => /^.{10}[Tt]/.test(s) && isDate(s.slice(0, 10)) && isTime(s.slice(11)),
  duration: (s) => /^P(?!$)(\d+Y)?(\d+M)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+S)?)?$/.test(s) || /^P\d+W$/.test(s),
  email: isEmail,
  hostname: isHostname,
  ipv4: (s) => net.isIPv4(s),
  ipv6: (s) => net.isIPv6(s),
  uuid: (s) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(s),
};
for (const [name, check] of Object.entries(formatChecks)) ajv.addFormat(name, check);

test("schema keywords (#46 item 3): bounds, lengths, pattern, format, enum/const/anyOf/$ref hold on every seed", async () => {
  const scalars = {
    type: "object",
    properties: {
      n: { type: "integer", minimum: -20, maximum: 35 },
      pos: { type: "integer", exclusiveMinimum: 0 },
      low: { type: "integer", maximum: -100 },
      x: { type: "number", minimum: -1.5, exclusiveMaximum: 2.25 },
      p: { type: "number", exclusiveMinimum: 0, maximum: 1000 },
      tags: { type: "array", items: { enum: ["a", "b", "c"] }, minItems: 2, maxItems: 4 },
      s: { type: "string", minLength: 3, maxLength: 8 },
      kind: { enum: ["x", 1, null] },
      fixed: { const: "k" },
      either: { anyOf: [{ type: "integer", minimum: 0, maximum: 9 }, { type: "string", maxLength: 3 }] },
      list: { $ref: "#/$defs/node" },
    },
    additionalProperties: false,
    $defs: {
      node: {
        type: "object",
        properties: { v: { type: "integer", minimum: 0, maximum: 99 }, next: { anyOf: [{ $ref: "#/$defs/node" }, { type: "null" }] } },
        required: ["v", "next"],
        additionalProperties: false,
      },
    },
  };
  scalars.required = Object.keys(scalars.properties);
  const strings = {
    type: "object",
    properties: {
      code: { type: "string", pattern: "^[A-Z]{2}-\\d{3}$" },
      word: { type: "string", pattern: "(cat|dog)s?", maxLength: 12 },
      day: { type: "string", format: "date" },
      at: { type: "string", format: "time" },
      when: { type: "string", format: "date-time" },
      span: { type: "string", format: "duration", maxLength: 10 },
      mail: { type: "string", format: "email", maxLength: 24 },
      host: { type: "string", format: "hostname", maxLength: 20 },
      v4: { type: "string", format: "ipv4" },
      v6: { type: "string", format: "ipv6" },
      id: { type: "string", format: "uuid" },
    },
    additionalProperties: false,
  };
  strings.required = Object.keys(strings.properties);
  for (const schema of [scalars, strings]) {
    const validate = ajv.compile(schema);
    const response_format = { type: "json_schema", json_schema: { name: "keywords", schema, strict: true } };
    for (const seed of SEEDS) {
      const r = await client.chat.completions.create({ model: "qwen", messages: hello, response_format, temperature: 1, seed, max_tokens: 1500 });
      const c = r.choices[0];
      assert.equal(c.finish_reason, "stop", `seed ${seed}: ${c.message.content}`);
      const doc = JSON.parse(c.message.content);
      assert.ok(validate(doc), `seed ${seed}: ${c.message.content} ${JSON.stringify(validate.errors)}`);
    }
  }
});

test("response_format json_object: a JSON object on every seed", async () => {
  for (const seed of SEEDS) {
    const r = await client.chat.completions.create({
      model: "qwen", messages: hello, response_format: { type: "json_object" }, temperature: 0.6, seed, max_tokens: 3000,
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, "stop", `seed ${seed}: ${c.message.content}`);
    const doc = JSON.parse(c.message.content);
    assert.ok(doc !== null && typeof doc === "object" && !Array.isArray(doc), c.message.content);
  }
});

test("bad schemas and tools are 400s naming the field", async () => {
  const cases = [
    [{ response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", pattern: "^(?=a)" } } } }, "response_format.json_schema.schema", /pattern.*lookahead/],
    [{ response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "integer", multipleOf: 3 } } } }, "response_format.json_schema.schema", /multipleOf/],
    [{ response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "integer", minimum: 5, maximum: 3 } } } }, "response_format.json_schema.schema", /minimum/],
    [{ response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", format: "uri" } } } }, "response_format.json_schema.schema", /format/],
    [{ response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", pattern: "(a|b)*a(a|b){20}" } } } }, "response_format.json_schema.schema", /pattern/],
    [{ response_format: { type: "json_schema", json_schema: { name: "x", schema: { $ref: "#/$defs/nope" } } } }, "response_format.json_schema.schema", /\$ref/],
    [{ tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { a: { type: "string", pattern: "(a)\\1" } } } } }], tool_choice: "required" }, "tools[0].function.parameters", /pattern.*backreference/],
    [{ tools: [weatherTool], tool_choice: { type: "function", function: { name: "nope" } } }, "tool_choice", /nope/],
    [{ logit_bias: { "99999": 5 } }, "logit_bias", /vocabulary/],
  ];
  for (const [extra, param, message] of cases) {
    await assert.rejects(client.chat.completions.create({ model: "qwen", messages: hello, max_tokens: 4, ...extra }), (e) => {
      assert.equal(e.status, 400, JSON.stringify(extra));
      assert.equal(e.param, param, e.message);
      assert.match(e.message, message);
      return true;
    });
  }
  // A template that renders no tools cannot offer them.
  await assert.rejects(client.chat.completions.create({ model: "plain", messages: hello, tools: [weatherTool], max_tokens: 4 }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, "tools");
    return true;
  });
});

test("logit_bias: +100 makes a token the greedy answer, chat and completions", async () => {
  const tok = await post("/tokenize", { model: "qwen", prompt: "ab", add_special_tokens: false });
  const id = tok.body.tokens[0];
  const text = (await post("/detokenize", { model: "qwen", tokens: Array(6).fill(id) })).body.prompt;
  const chat = await client.chat.completions.create({ model: "qwen", messages: hello, max_tokens: 6, temperature: 0, logit_bias: { [id]: 100 } });
  assert.equal(chat.choices[0].message.content, text);
  const comp = await client.completions.create({ model: "qwen", prompt: "Once", max_tokens: 6, temperature: 0.9, seed: 3, logit_bias: { [id]: 100 } });
  assert.equal(comp.choices[0].text, text);
  // -100 on the greedy choice moves it.
  const plain = await client.completions.create({ model: "qwen", prompt: "Once", max_tokens: 1, temperature: 0 });
  const first = (await post("/tokenize", { model: "qwen", prompt: plain.choices[0].text, add_special_tokens: false })).body.tokens[0];
  const moved = await client.completions.create({ model: "qwen", prompt: "Once", max_tokens: 1, temperature: 0, logit_bias: { [first]: -100 } });
  assert.notEqual(moved.choices[0].text, plain.choices[0].text);
});

test("structured output after reasoning (#46 item 4): the thinking in reasoning_content, valid JSON in content", async () => {
  const schema = {
    type: "object",
    properties: { city: { type: "string", maxLength: 10 }, ok: { type: "boolean" }, unit: { enum: ["celsius", "fahrenheit"] } },
    required: ["city", "ok", "unit"],
    additionalProperties: false,
  };
  const validate = ajv.compile(schema);
  const response_format = { type: "json_schema", json_schema: { name: "answer", schema, strict: true } };
  // The "think" prompt opens the thinking; a random model never closes it by itself, so a
  // thinking_token_budget forces the close marker after 6 thinking tokens.
  for (const seed of [1, 2, 3, 4]) {
    const params = { model: "think", messages: hello, response_format, temperature: 1, seed, max_tokens: 300, thinking_token_budget: 6 };
    const r = await client.chat.completions.create(params);
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, "stop", `seed ${seed}: ${JSON.stringify(m)}`);
    assert.ok(m.reasoning_content.length > 0, `seed ${seed}`);
    assert.ok(!m.reasoning_content.includes("</think>"), m.reasoning_content);
    const doc = JSON.parse(m.content);
    assert.ok(validate(doc), `seed ${seed}: ${m.content} ${JSON.stringify(validate.errors)}`);
    assert.ok(r.usage.completion_tokens_details.reasoning_tokens >= 6);
    assert.ok(r.usage.completion_tokens_details.reasoning_tokens < r.usage.completion_tokens);
    const stream = await client.chat.completions.create({ ...params, stream: true });
    let reasoning = "", content = "";
    for await (const chunk of stream) {
      reasoning += chunk.choices[0]?.delta?.reasoning_content ?? "";
      content += chunk.choices[0]?.delta?.content ?? "";
    }
    assert.equal(reasoning, m.reasoning_content, `seed ${seed}`);
    assert.equal(content, m.content, `seed ${seed}`);
  }
  // json_object and a required tool call after the thinking, too.
  const obj = await client.chat.completions.create({ model: "think", messages: hello, response_format: { type: "json_object" }, temperature: 1, seed: 9, max_tokens: 300, thinking_token_budget: 4 });
  assert.equal(obj.choices[0].finish_reason, "stop");
  assert.ok(obj.choices[0].message.reasoning_content.length > 0);
  assert.equal(typeof JSON.parse(obj.choices[0].message.content), "object");
  const validateArgs = ajv.compile(weatherTool.function.parameters);
  const call = await client.chat.completions.create({ model: "think", messages: hello, tools: [weatherTool], tool_choice: "required", parallel_tool_calls: false, temperature: 1, seed: 3, max_tokens: 300, thinking_token_budget: 4 });
  const cm = call.choices[0].message;
  assert.equal(call.choices[0].finish_reason, "tool_calls", JSON.stringify(cm));
  assert.ok(cm.reasoning_content.length > 0);
  assert.equal(cm.tool_calls.length, 1);
  assert.ok(validateArgs(JSON.parse(cm.tool_calls[0].function.arguments)), cm.tool_calls[0].function.arguments);
  // Qwen3's template with enable_thinking: the model may think first; either way the JSON is content.
  const q = await client.chat.completions.create({ model: "qwen", messages: hello, response_format, temperature: 1, seed: 2, max_tokens: 300, chat_template_kwargs: { enable_thinking: true }, thinking_token_budget: 4 });
  assert.equal(q.choices[0].finish_reason, "stop");
  assert.ok(validate(JSON.parse(q.choices[0].message.content)), q.choices[0].message.content);
  // Out of tokens inside the thinking: finish_reason length, empty content, the partial thinking.
  const cut = { model: "think", messages: hello, response_format, temperature: 1, seed: 1, max_tokens: 5 };
  const c = await client.chat.completions.create(cut);
  assert.equal(c.choices[0].finish_reason, "length");
  assert.equal(c.choices[0].message.content, "");
  assert.ok(c.choices[0].message.reasoning_content.length > 0);
  assert.equal(c.usage.completion_tokens_details.reasoning_tokens, 5);
  let cutContent = "";
  for await (const chunk of await client.chat.completions.create({ ...cut, stream: true })) cutContent += chunk.choices[0]?.delta?.content ?? "";
  assert.equal(cutContent, "");
});

test("reasoning: a prompt that opens the thinking keeps all of it out of content, whole and streamed", async () => {
  const params = { model: "think", messages: hello, max_tokens: 24, temperature: 1, seed: 5 };
  const r = await client.chat.completions.create(params);
  const m = r.choices[0].message;
  assert.equal(m.content, "");
  assert.ok(m.reasoning_content.length > 0);
  assert.equal(r.usage.completion_tokens_details.reasoning_tokens, r.usage.completion_tokens);
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let reasoning = "", content = "", usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const d = chunk.choices[0]?.delta;
    reasoning += d?.reasoning_content ?? "";
    content += d?.content ?? "";
  }
  assert.equal(content, "");
  assert.equal(reasoning, m.reasoning_content);
  assert.equal(usage.completion_tokens_details.reasoning_tokens, r.usage.completion_tokens_details.reasoning_tokens);
  // The qwen template does not open the thinking: a random model's text is content.
  const q = await client.chat.completions.create({ ...params, model: "qwen" });
  assert.equal(q.choices[0].message.reasoning_content, undefined);
  assert.equal(q.usage.completion_tokens_details.reasoning_tokens, 0);
});
