// /v1/messages through the real Anthropic SDK (@anthropic-ai/sdk: messages.create and
// messages.stream(...).finalMessage()), against memra-host serving the random-weight
// test model under Qwen3's own chat template ("qwen") and a thinking template ("think").
// Oracles: /v1/chat/completions on the same model (the same conversation as chat
// messages: the same prompt tokens and, greedy or seeded, the same text and calls),
// @huggingface/jinja rendering Qwen3's template, ajv for tool inputs, the SDK's own
// stream accumulation (must equal the whole message), and Anthropic's error shape.
//   node anthropic_client.mjs ROOT_URL QWEN_TEMPLATE KEY   (MEMRA_NODE_DIR set)
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [root, qwenTemplatePath, key] = process.argv.slice(2);
const nodeDir = process.env.MEMRA_NODE_DIR;
assert.ok(root && qwenTemplatePath && key && nodeDir, "usage: ROOT_URL QWEN_TEMPLATE KEY");
const load = (p) => import(pathToFileURL(path.join(nodeDir, "node_modules", p)).href);
const { default: Anthropic } = await load("@anthropic-ai/sdk/index.mjs");
const { default: OpenAI } = await load("openai/index.mjs");
const { Template } = await load("@huggingface/jinja/dist/index.js");
const { default: Ajv } = await load("ajv/dist/2020.js");
const ajv = new Ajv({ strict: false });

// The SDK sends the key as x-api-key, as it does to Anthropic.
const client = new Anthropic({ baseURL: root, apiKey: key, maxRetries: 0, timeout: 120_000 });
const openai = new OpenAI({ baseURL: root + "/v1", apiKey: key, maxRetries: 0, timeout: 120_000 });
const qwenTemplate = new Template(fs.readFileSync(qwenTemplatePath, "utf8"));
const question = "What is the weather in Paris?";

// A Message's prompt as Anthropic counts it: input_tokens leave out the cache's writes and reads.
function promptOf(u) {
  return u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
}

async function oracleTokens(context) {
  const text = qwenTemplate.render({ bos_token: "", eos_token: "<|im_end|>", add_generation_prompt: true, ...context });
  const r = await fetch(root + "/tokenize", {
    method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: "qwen", prompt: text, add_special_tokens: false }),
  }).then((r) => r.json());
  return r.count;
}

const inputSchema = {
  type: "object",
  properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["celsius", "fahrenheit"] } },
  required: ["city", "unit"],
  additionalProperties: false,
};
const weatherTool = { name: "get_weather", description: "Current weather of a city", input_schema: inputSchema };
const chatWeatherTool = { type: "function", function: { name: "get_weather", description: "Current weather of a city", parameters: inputSchema } };

test("messages.create: the Message shape, answering like the chat route", async () => {
  const m = await client.messages.create({ model: "qwen", max_tokens: 12, temperature: 0, system: "Be brief.", messages: [{ role: "user", content: question }] });
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.match(m.id, /^msg_/);
  assert.equal(m.model, "qwen");
  assert.equal(m.content[0].type, "text");
  const chat = await openai.chat.completions.create({
    model: "qwen", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: question }], max_tokens: 12, temperature: 0,
  });
  assert.equal(m.content[0].text, chat.choices[0].message.content);
  assert.equal(m.stop_reason, chat.choices[0].finish_reason === "length" ? "max_tokens" : "end_turn");
  assert.equal(m.stop_sequence, null);
  assert.equal(promptOf(m.usage), chat.usage.prompt_tokens);
  assert.equal(m.usage.output_tokens, chat.usage.completion_tokens);
  assert.equal(chat.usage.prompt_tokens, await oracleTokens({ messages: [{ role: "system", content: "Be brief." }, { role: "user", content: question }] }));
  // System as text blocks, content as text blocks: the same prompt.
  const blocks = await client.messages.create({
    model: "qwen", max_tokens: 12, temperature: 0, system: [{ type: "text", text: "Be brief." }],
    messages: [{ role: "user", content: [{ type: "text", text: question }] }],
  });
  assert.equal(blocks.content[0].text, m.content[0].text);
});

test("messages.countTokens: the prompt tokens messages.create reports for the same body", async () => {
  const tools = [{ name: "get_weather", description: "Current weather of a city", input_schema: inputSchema }];
  for (const body of [
    { model: "qwen", system: "Be brief.", messages: [{ role: "user", content: question }] },
    { model: "qwen", messages: [{ role: "user", content: question }, { role: "assistant", content: "Sunny." }, { role: "user", content: "And tomorrow?" }] },
    { model: "qwen", messages: [{ role: "user", content: question }], tools },
  ]) {
    const counted = await client.messages.countTokens(body);
    const m = await client.messages.create({ ...body, max_tokens: 1, temperature: 0 });
    assert.equal(counted.input_tokens, promptOf(m.usage));
    assert.ok(counted.input_tokens > 0);
  }
  await assert.rejects(client.messages.countTokens({ model: "qwen", messages: [] }), (e) => e.status === 400 && e.error?.type === "error");
  await assert.rejects(client.messages.countTokens({ model: "nope", messages: [{ role: "user", content: "x" }] }), (e) => e.status === 404);
});

test("stop_sequences: stop_reason stop_sequence names the one that matched", async () => {
  const full = await client.messages.create({ model: "qwen", max_tokens: 40, temperature: 0, messages: [{ role: "user", content: question }] });
  const text = full.content[0].text;
  let stop = null;
  for (let i = 1; i + 2 <= text.length && !stop; i++) {
    const s = text.slice(i, i + 2);
    if (/^[\x21-\x7e]{2}$/.test(s)) stop = s;
  }
  assert.ok(stop, `no ASCII pair in ${JSON.stringify(text)}`);
  const params = { model: "qwen", max_tokens: 40, temperature: 0, messages: [{ role: "user", content: question }], stop_sequences: ["\u0000never", stop] };
  const m = await client.messages.create(params);
  // The chat route with the same stops is the oracle for the text.
  const chat = await openai.chat.completions.create({ model: "qwen", messages: [{ role: "user", content: question }], max_tokens: 40, temperature: 0, stop: params.stop_sequences });
  assert.equal(m.content[0].text, chat.choices[0].message.content);
  assert.ok(text.startsWith(m.content[0].text.trimStart()));
  assert.equal(m.stop_reason, "stop_sequence");
  assert.equal(m.stop_sequence, stop);
  const streamed = await client.messages.stream(params).finalMessage();
  assert.equal(streamed.stop_reason, "stop_sequence");
  assert.equal(streamed.stop_sequence, stop);
  assert.equal(streamed.content[0].text, m.content[0].text);
});

test("messages.stream: finalMessage equals the whole message; the event sequence is Anthropic's", async () => {
  const params = { model: "qwen", max_tokens: 16, temperature: 0.9, top_p: 0.95, top_k: 40, messages: [{ role: "user", content: question }] };
  // Seeded by position: a greedy run is the comparable one; temperature 0 for both.
  const greedy = { ...params, temperature: 0 };
  const whole = await client.messages.create(greedy);
  const stream = client.messages.stream(greedy);
  const types = [];
  let text = "";
  stream.on("streamEvent", (e) => types.push(e.type));
  stream.on("text", (t) => { text += t; });
  const final = await stream.finalMessage();
  assert.deepEqual(final.content, whole.content);
  assert.equal(text, whole.content[0].text);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  assert.equal(promptOf(final.usage), promptOf(whole.usage));
  assert.equal(types[0], "message_start");
  assert.equal(types.at(-1), "message_stop");
  assert.equal(types.at(-2), "message_delta");
  assert.ok(types.includes("content_block_start") && types.includes("content_block_stop"));
  // Sampling parameters are taken (top_k, top_p) and the raw iterator sees the same kinds of events.
  const raw = await client.messages.create({ ...params, stream: true });
  const rawTypes = [];
  for await (const e of raw) rawTypes.push(e.type);
  assert.equal(rawTypes[0], "message_start");
  assert.equal(rawTypes.at(-1), "message_stop");
});

test("tools: tool_choice any and tool give schema-valid tool_use blocks; streamed input_json_delta accumulates", async () => {
  const validate = ajv.compile(inputSchema);
  for (const seed of [1, 2, 3]) {
    const choice = seed === 3 ? { type: "tool", name: "get_weather", disable_parallel_tool_use: true } : { type: "any" };
    const params = { model: "qwen", max_tokens: 400, temperature: 1, messages: [{ role: "user", content: question }], tools: [weatherTool], tool_choice: choice };
    // Greedy keeps the whole and the streamed answers comparable without a seed field.
    const greedy = { ...params, temperature: 0 };
    const m = await client.messages.create(greedy);
    assert.equal(m.stop_reason, "tool_use", JSON.stringify(m.content));
    const uses = m.content.filter((b) => b.type === "tool_use");
    assert.ok(uses.length >= 1);
    if (seed === 3) assert.equal(uses.length, 1);
    for (const u of uses) {
      assert.equal(u.name, "get_weather");
      assert.match(u.id, /^toolu_/);
      assert.ok(validate(u.input), JSON.stringify(u.input));
    }
    const chat = await openai.chat.completions.create({
      model: "qwen", messages: [{ role: "user", content: question }], tools: [chatWeatherTool], tool_choice: "required", temperature: 0, max_tokens: 400,
    });
    assert.deepEqual(uses.map((u) => u.input), chat.choices[0].message.tool_calls.map((c) => JSON.parse(c.function.arguments)));
    const final = await client.messages.stream(greedy).finalMessage();
    assert.equal(final.stop_reason, "tool_use");
    assert.deepEqual(final.content.filter((b) => b.type === "tool_use").map((u) => [u.name, u.input]), uses.map((u) => [u.name, u.input]));
  }
});

test("tool_use and tool_result blocks sent back render as the chat route's tool turns", async () => {
  const messages = [
    { role: "user", content: question },
    { role: "assistant", content: [{ type: "text", text: "Let me check." }, { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris", unit: "celsius" } }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: '{"temperature":21}' }, { type: "text", text: "Thanks" }] },
  ];
  const m = await client.messages.create({ model: "qwen", max_tokens: 8, temperature: 0, messages, tools: [weatherTool] });
  const chatMessages = [
    { role: "user", content: question },
    { role: "assistant", content: "Let me check.", tool_calls: [{ id: "toolu_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris","unit":"celsius"}' } }] },
    { role: "tool", tool_call_id: "toolu_1", content: '{"temperature":21}' },
    { role: "user", content: "Thanks" },
  ];
  const chat = await openai.chat.completions.create({ model: "qwen", messages: chatMessages, tools: [chatWeatherTool], max_tokens: 8, temperature: 0 });
  assert.equal(promptOf(m.usage), chat.usage.prompt_tokens);
  const oracle = await oracleTokens({
    messages: [chatMessages[0], { ...chatMessages[1], tool_calls: [{ ...chatMessages[1].tool_calls[0], function: { name: "get_weather", arguments: { city: "Paris", unit: "celsius" } } }] },
      { ...chatMessages[2], name: "get_weather" }, chatMessages[3]],
    tools: [chatWeatherTool],
  });
  assert.equal(chat.usage.prompt_tokens, oracle);
});

test("thinking: a thinking block before the text, never inside it", async () => {
  const params = { model: "think", max_tokens: 24, temperature: 0, messages: [{ role: "user", content: question }] };
  const m = await client.messages.create(params);
  const chat = await openai.chat.completions.create({ model: "think", messages: [{ role: "user", content: question }], max_tokens: 24, temperature: 0 });
  assert.equal(m.content[0].type, "thinking");
  assert.equal(m.content[0].thinking, chat.choices[0].message.reasoning_content);
  const text = m.content.find((b) => b.type === "text");
  assert.equal(text ? text.text : "", chat.choices[0].message.content ?? "");
  const final = await client.messages.stream(params).finalMessage();
  assert.deepEqual(final.content, m.content);
});

test("thinking.budget_tokens: the thinking is closed after the budget and the answer follows (#46 item 4)", async () => {
  // The random model never closes its thinking by itself: without a budget it thinks to max_tokens.
  const base = { model: "think", max_tokens: 1040, temperature: 1, messages: [{ role: "user", content: question }] };
  const free = await client.messages.create({ ...base, max_tokens: 40 });
  assert.equal(free.stop_reason, "max_tokens");
  assert.deepEqual(free.content.map((b) => b.type), ["thinking"]);
  const m = await client.messages.create({ ...base, thinking: { type: "enabled", budget_tokens: 1024 } });
  assert.equal(m.content[0].type, "thinking");
  assert.ok(m.content[0].thinking.length > 0);
  assert.ok(!m.content[0].thinking.includes("</think>"));
  // Closed: an answer after it, or the end of the turn right after the marker.
  assert.ok(m.content.some((b) => b.type === "text") || m.stop_reason === "end_turn", JSON.stringify(m).slice(-400));
  for (const budget_tokens of [10, 1040]) {
    await assert.rejects(client.messages.create({ ...base, thinking: { type: "enabled", budget_tokens } }), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.message, /budget_tokens/);
      return true;
    });
  }
});

test("errors are in Anthropic's shape; the SDK maps them to its error classes", async () => {
  for (const [body, status, needle] of [
    [{ messages: [{ role: "user", content: "x" }] }, 400, "max_tokens"],
    [{ max_tokens: 4, messages: [{ role: "system", content: "x" }] }, 400, "messages.0.role"],
    [{ max_tokens: 4, messages: [{ role: "user", content: [{ type: "image", source: {} }] }] }, 400, "messages.0.content.0.type"],
    [{ max_tokens: 4, messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "nope" }] }] }, 400, "tool_use_id"],
    [{ max_tokens: 4, temperature: 1.5, messages: [{ role: "user", content: "x" }] }, 400, "temperature"],
    [{ max_tokens: 4, tools: [{ name: "f" }], messages: [{ role: "user", content: "x" }] }, 400, "tools.0.input_schema"],
    [{ max_tokens: 4, tools: [weatherTool], tool_choice: { type: "tool", name: "nope" }, messages: [{ role: "user", content: "x" }] }, 400, "tool_choice"],
    [{ max_tokens: 4, frobnicate: 1, messages: [{ role: "user", content: "x" }] }, 400, "frobnicate"],
  ]) {
    await assert.rejects(client.messages.create({ model: "qwen", ...body }), (e) => {
      assert.ok(e instanceof Anthropic.BadRequestError, `${JSON.stringify(body)}: ${e}`);
      assert.equal(e.status, status);
      assert.equal(e.error.type, "error");
      assert.equal(e.error.error.type, "invalid_request_error");
      assert.ok(e.error.error.message.includes(needle), `${needle} in ${e.error.error.message}`);
      return true;
    });
  }
  await assert.rejects(client.messages.create({ model: "nope", max_tokens: 4, messages: [{ role: "user", content: "x" }] }), (e) => {
    assert.ok(e instanceof Anthropic.NotFoundError, String(e));
    assert.equal(e.error.error.type, "not_found_error");
    return true;
  });
  const bad = new Anthropic({ baseURL: root, apiKey: "sk-wrong", maxRetries: 0 });
  await assert.rejects(bad.messages.create({ model: "qwen", max_tokens: 4, messages: [{ role: "user", content: "x" }] }), (e) => {
    assert.ok(e instanceof Anthropic.AuthenticationError, String(e));
    assert.equal(e.error.error.type, "authentication_error");
    return true;
  });
});
