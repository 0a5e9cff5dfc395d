// /v1/responses through the real `openai` npm client (client.responses.create and
// client.responses.stream), against memra-host serving the random-weight test model
// under Qwen3's own chat template ("qwen") and under a thinking template ("think").
// Oracles: /v1/chat/completions on the same model (the same conversation sent as chat
// messages must give the same prompt tokens and, greedy or seeded, the same text and
// calls), @huggingface/jinja rendering Qwen3's template, ajv for call arguments, and the
// SDK's own stream accumulation, which must equal the whole answer.
//   node responses_client.mjs BASE_URL QWEN_TEMPLATE KEY_A KEY_B   (MEMRA_NODE_DIR set)
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [baseURL, qwenTemplatePath, keyA, keyB] = process.argv.slice(2);
const nodeDir = process.env.MEMRA_NODE_DIR;
assert.ok(baseURL && qwenTemplatePath && keyA && keyB && nodeDir, "usage: BASE_URL QWEN_TEMPLATE KEY_A KEY_B");
const load = (p) => import(pathToFileURL(path.join(nodeDir, "node_modules", p)).href);
const { default: OpenAI } = await load("openai/index.mjs");
const { Template } = await load("@huggingface/jinja/dist/index.js");
const { default: Ajv } = await load("ajv/dist/2020.js");
const ajv = new Ajv({ strict: false });

const client = new OpenAI({ baseURL, apiKey: keyA, maxRetries: 0, timeout: 120_000 });
const other = new OpenAI({ baseURL, apiKey: keyB, maxRetries: 0, timeout: 120_000 });
const root = baseURL.replace(/\/v1$/, "");
const qwenTemplate = new Template(fs.readFileSync(qwenTemplatePath, "utf8"));
const question = "What is the weather in Paris?";

async function oracleTokens(context) {
  const text = qwenTemplate.render({ bos_token: "", eos_token: "<|im_end|>", add_generation_prompt: true, ...context });
  const r = await fetch(root + "/tokenize", {
    method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${keyA}` },
    body: JSON.stringify({ model: "qwen", prompt: text, add_special_tokens: false }),
  }).then((r) => r.json());
  return r.count;
}

const weatherParams = {
  type: "object",
  properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["celsius", "fahrenheit"] } },
  required: ["city", "unit"],
  additionalProperties: false,
};
// The Responses API's flat function tool, and the same tool as chat writes it.
const weatherTool = { type: "function", name: "get_weather", description: "Current weather of a city", strict: true, parameters: weatherParams };
const chatWeatherTool = { type: "function", function: { name: "get_weather", description: "Current weather of a city", strict: true, parameters: weatherParams } };

test("responses.create: a string input answers like the chat route, with the Response shape", async () => {
  const r = await client.responses.create({ model: "qwen", input: question, max_output_tokens: 12, temperature: 0, instructions: "Be brief." });
  assert.equal(r.object, "response");
  assert.match(r.id, /^resp_/);
  assert.ok(["completed", "incomplete"].includes(r.status), r.status);
  assert.equal(r.model, "qwen");
  assert.equal(r.instructions, "Be brief.");
  assert.equal(r.output.at(-1).type, "message");
  assert.equal(r.output.at(-1).role, "assistant");
  assert.equal(r.output.at(-1).content[0].type, "output_text");
  const chat = await client.chat.completions.create({
    model: "qwen", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: question }], max_tokens: 12, temperature: 0,
  });
  assert.equal(r.output_text, chat.choices[0].message.content, "the SDK's output_text is the chat answer");
  assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
  assert.equal(r.usage.output_tokens, chat.usage.completion_tokens);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(r.status, chat.choices[0].finish_reason === "length" ? "incomplete" : "completed");
  if (r.status === "incomplete") assert.equal(r.incomplete_details.reason, "max_output_tokens");
  assert.equal(r.usage.input_tokens, await oracleTokens({ messages: [{ role: "system", content: "Be brief." }, { role: "user", content: question }] }));
});

test("responses.stream: the SDK's accumulation equals the whole answer, events in order with sequence numbers", async () => {
  const params = { model: "qwen", input: [{ role: "user", content: [{ type: "input_text", text: question }] }], max_output_tokens: 16, temperature: 0.9, top_p: 0.95, seed: 11 };
  const whole = await client.responses.create(params);
  const stream = client.responses.stream(params);
  const events = [];
  let deltas = "";
  stream.on("event", (e) => events.push(e));
  stream.on("response.output_text.delta", (e) => { deltas += e.delta; });
  const final = await stream.finalResponse();
  assert.equal(final.output_text, whole.output_text);
  assert.equal(deltas, whole.output_text);
  assert.equal(final.status, whole.status);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  const types = events.map((e) => e.type);
  assert.deepEqual(types.slice(0, 4), ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]);
  assert.deepEqual(types.slice(-4), ["response.output_text.done", "response.content_part.done", "response.output_item.done",
    final.status === "completed" ? "response.completed" : "response.incomplete"]);
  const done = events.find((e) => e.type === "response.output_text.done");
  assert.equal(done.text, whole.output_text);
  // The raw event iterator sees the same events.
  // The raw event iterator sees the same events (how many deltas depends on timing).
  const collapse = (list) => list.filter((t, i) => !t.endsWith(".delta") || list[i - 1] !== t);
  const raw = await client.responses.create({ ...params, stream: true });
  const rawTypes = [];
  let rawText = "";
  for await (const e of raw) {
    rawTypes.push(e.type);
    if (e.type === "response.output_text.delta") rawText += e.delta;
  }
  assert.deepEqual(collapse(rawTypes), collapse(types));
  assert.equal(rawText, whole.output_text);
});

test("a function tool: required and named choices give schema-valid calls; streamed calls accumulate to the whole", async () => {
  const validate = ajv.compile(weatherParams);
  for (const seed of [1, 2, 3]) {
    const params = { model: "qwen", input: question, tools: [weatherTool], tool_choice: "required", temperature: 1, seed, max_output_tokens: 400 };
    const r = await client.responses.create(params);
    const calls = r.output.filter((o) => o.type === "function_call");
    assert.ok(calls.length >= 1, JSON.stringify(r.output));
    for (const c of calls) {
      assert.equal(c.name, "get_weather");
      assert.match(c.call_id, /^call_/);
      assert.match(c.id, /^fc_/);
      assert.equal(c.status, "completed");
      assert.ok(validate(JSON.parse(c.arguments)), c.arguments);
    }
    // The chat route with the same request makes the same calls.
    const chat = await client.chat.completions.create({
      model: "qwen", messages: [{ role: "user", content: question }], tools: [chatWeatherTool], tool_choice: "required", temperature: 1, seed, max_tokens: 400,
    });
    assert.deepEqual(calls.map((c) => [c.name, c.arguments]), chat.choices[0].message.tool_calls.map((c) => [c.function.name, c.function.arguments]));
    const stream = client.responses.stream(params);
    const argDeltas = [];
    stream.on("response.function_call_arguments.delta", (e) => argDeltas.push(e.delta));
    const final = await stream.finalResponse();
    const got = final.output.filter((o) => o.type === "function_call");
    assert.deepEqual(got.map((c) => [c.name, c.arguments]), calls.map((c) => [c.name, c.arguments]));
    assert.equal(argDeltas.join(""), calls.map((c) => c.arguments).join(""));
  }
  const named = await client.responses.create({
    model: "qwen", input: question, tools: [weatherTool], tool_choice: { type: "function", name: "get_weather" }, parallel_tool_calls: false, temperature: 1, seed: 4, max_output_tokens: 400,
  });
  const calls = named.output.filter((o) => o.type === "function_call");
  assert.equal(calls.length, 1);
  assert.deepEqual(named.tool_choice, { type: "function", name: "get_weather" });
  assert.equal(named.tools[0].name, "get_weather");
});

test("function_call and function_call_output input items render as the chat route's tool turns", async () => {
  const input = [
    { role: "user", content: question },
    { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris","unit":"celsius"}' },
    { type: "function_call_output", call_id: "call_1", output: '{"temperature":21}' },
  ];
  const r = await client.responses.create({ model: "qwen", input, tools: [weatherTool], max_output_tokens: 8, temperature: 0 });
  const chatMessages = [
    { role: "user", content: question },
    { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris","unit":"celsius"}' } }] },
    { role: "tool", tool_call_id: "call_1", content: '{"temperature":21}' },
  ];
  const chat = await client.chat.completions.create({ model: "qwen", messages: chatMessages, tools: [chatWeatherTool], max_tokens: 8, temperature: 0 });
  assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
  assert.equal(r.output_text, chat.choices[0].message.content ?? "");
  // The reference renderer (the template sees arguments as an object, as memra passes them).
  const oracle = await oracleTokens({
    messages: [chatMessages[0], { ...chatMessages[1], content: "", tool_calls: [{ ...chatMessages[1].tool_calls[0], function: { name: "get_weather", arguments: { city: "Paris", unit: "celsius" } } }] },
      { ...chatMessages[2], name: "get_weather" }],
    tools: [chatWeatherTool],
  });
  assert.equal(r.usage.input_tokens, oracle);
});

test("previous_response_id continues the stored conversation, for its own tenant only", async () => {
  const first = await client.responses.create({ model: "qwen", input: question, instructions: "Be brief.", max_output_tokens: 6, temperature: 0 });
  const next = await client.responses.create({ model: "qwen", input: "And tomorrow?", previous_response_id: first.id, max_output_tokens: 6, temperature: 0 });
  assert.equal(next.previous_response_id, first.id);
  // The same turns sent in full (instructions do not carry over to the next response).
  const replay = await client.responses.create({
    model: "qwen", max_output_tokens: 6, temperature: 0,
    input: [{ role: "user", content: question }, { role: "assistant", content: first.output_text }, { role: "user", content: "And tomorrow?" }],
  });
  assert.equal(next.usage.input_tokens, replay.usage.input_tokens);
  assert.equal(next.output_text, replay.output_text);
  // A chain: the third sees all earlier turns.
  const third = await client.responses.create({ model: "qwen", input: "Thanks.", previous_response_id: next.id, max_output_tokens: 4, temperature: 0 });
  assert.ok(third.usage.input_tokens > next.usage.input_tokens);
  // Another tenant cannot read it; an unknown id is OpenAI's 400 previous_response_not_found.
  for (const [c, id] of [[other, first.id], [client, "resp_doesnotexist"]]) {
    await assert.rejects(c.responses.create({ model: "qwen", input: "x", previous_response_id: id, max_output_tokens: 2 }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.code, "previous_response_not_found");
      assert.equal(e.param, "previous_response_id");
      return true;
    });
  }
  // store: false keeps nothing; a streamed response is stored too.
  const unstored = await client.responses.create({ model: "qwen", input: question, store: false, max_output_tokens: 2 });
  assert.equal(unstored.store, false);
  await assert.rejects(client.responses.create({ model: "qwen", input: "x", previous_response_id: unstored.id, max_output_tokens: 2 }), (e) => e.status === 400);
  const streamed = await client.responses.stream({ model: "qwen", input: question, max_output_tokens: 4, temperature: 0 }).finalResponse();
  const after = await client.responses.create({ model: "qwen", input: "More.", previous_response_id: streamed.id, max_output_tokens: 2, temperature: 0 });
  assert.ok(after.usage.input_tokens > streamed.usage.input_tokens);
});

test("responses.retrieve and responses.delete: the stored Response, for its own tenant only; models.retrieve", async () => {
  const made = await client.responses.create({ model: "qwen", input: question, max_output_tokens: 6, temperature: 0 });
  const got = await client.responses.retrieve(made.id);
  assert.deepEqual(got, made);  // the same Response object the create call returned
  const streamed = await client.responses.stream({ model: "qwen", input: question, max_output_tokens: 4, temperature: 0 }).finalResponse();
  const gotStreamed = await client.responses.retrieve(streamed.id);
  assert.equal(gotStreamed.id, streamed.id);
  assert.equal(gotStreamed.output_text, streamed.output_text);
  assert.deepEqual(gotStreamed.usage, streamed.usage);
  const notFound = (e) => {
    assert.equal(e.status, 404);
    assert.equal(e.code, "response_not_found");
    return true;
  };
  await assert.rejects(other.responses.retrieve(made.id), notFound);  // another tenant's
  await assert.rejects(other.responses.delete(made.id), notFound);
  const unstored = await client.responses.create({ model: "qwen", input: question, store: false, max_output_tokens: 2 });
  await assert.rejects(client.responses.retrieve(unstored.id), notFound);
  // delete resolves (the SDK returns nothing); then it is gone for retrieve and previous_response_id.
  await client.responses.delete(made.id);
  await assert.rejects(client.responses.retrieve(made.id), notFound);
  await assert.rejects(client.responses.delete(made.id), notFound);
  await assert.rejects(client.responses.create({ model: "qwen", input: "x", previous_response_id: made.id, max_output_tokens: 2 }),
                       (e) => e.status === 400 && e.code === "previous_response_not_found");
  const model = await client.models.retrieve("qwen");
  assert.equal(model.id, "qwen");
  assert.equal(model.object, "model");
  await assert.rejects(client.models.retrieve("no-such-model"), (e) => e.status === 404);
});

test("text.format json_schema and json_object constrain the output", async () => {
  const schema = { type: "object", properties: { answer: { type: "string", maxLength: 10 }, n: { type: "integer" } }, required: ["answer", "n"], additionalProperties: false };
  const validate = ajv.compile(schema);
  for (const seed of [1, 2, 3]) {
    const r = await client.responses.create({
      model: "qwen", input: question, temperature: 1, seed, max_output_tokens: 300,
      text: { format: { type: "json_schema", name: "reply", schema, strict: true } },
    });
    assert.equal(r.status, "completed", JSON.stringify(r.output));
    assert.ok(validate(JSON.parse(r.output_text)), r.output_text);
    assert.equal(r.text.format.type, "json_schema");
    const obj = await client.responses.create({ model: "qwen", input: question, temperature: 0.6, seed, max_output_tokens: 3000, text: { format: { type: "json_object" } } });
    assert.equal(obj.status, "completed", obj.output_text);
    const doc = JSON.parse(obj.output_text);
    assert.ok(doc !== null && typeof doc === "object" && !Array.isArray(doc), obj.output_text);
  }
});

test("thinking goes into a reasoning item, never into output_text", async () => {
  const params = { model: "think", input: question, max_output_tokens: 24, temperature: 1, seed: 5, stop: undefined };
  const r = await client.responses.create(params);
  const chat = await client.chat.completions.create({ model: "think", messages: [{ role: "user", content: question }], max_tokens: 24, temperature: 1, seed: 5 });
  const reasoning = r.output.find((o) => o.type === "reasoning");
  assert.ok(reasoning, JSON.stringify(r.output));
  assert.equal(reasoning.content[0].text, chat.choices[0].message.reasoning_content);
  assert.equal(r.output_text, chat.choices[0].message.content);
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, chat.usage.completion_tokens_details.reasoning_tokens);
  const final = await client.responses.stream(params).finalResponse();
  assert.equal(final.output.find((o) => o.type === "reasoning").content[0].text, reasoning.content[0].text);
  assert.equal(final.output_text, r.output_text);
});

test("bad requests are OpenAI-shaped 400s naming the field", async () => {
  for (const [body, param] of [
    [{ input: 5 }, "input"],
    [{ input: [{ type: "input_image", image_url: "x" }] }, "input[0].type"],
    [{ input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] }, "input[0].content[0].type"],
    [{ input: "x", tools: [{ type: "web_search" }] }, "tools[0].type"],
    [{ input: "x", tools: [weatherTool], tool_choice: { type: "function", name: "nope" } }, "tool_choice"],
    [{ input: "x", max_output_tokens: 0 }, "max_output_tokens"],
    [{ input: "x", temperature: 3 }, "temperature"],
    [{ input: "x", text: { format: { type: "json_schema", schema: {} } } }, "text.format.name"],
    [{ input: "x", truncation: "auto" }, "truncation"],
    [{ input: "x", frobnicate: 1 }, "frobnicate"],
    [{ input: [{ type: "function_call_output", call_id: "nope", output: "x" }] }, "input"],
  ]) {
    await assert.rejects(client.responses.create({ model: "qwen", ...body }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, `${JSON.stringify(body)}: ${e}`);
      assert.equal(e.param, param, JSON.stringify(body));
      return true;
    });
  }
});
