// Conformance: every answer and every streamed event memra-host sends, checked against the
// APIs' own definitions (spec_check.mjs): the OpenAI OpenAPI document for /v1/models,
// /v1/chat/completions (plain, streamed, with tools, streamed tool calls, a forced call cut
// by max_tokens), /v1/completions (plain, streamed), /v1/responses (whole, every streamed
// event, retrieve), /v1/embeddings and 4xx error objects; @anthropic-ai/sdk's types for
// /v1/messages (whole, every streamed event, count_tokens, errors). Raw HTTP (fetch), so
// what is checked is exactly what was sent. Besides the shapes, the streamed tool-call
// protocol: a call's first delta carries index, id, type and name with arguments "", then its
// arguments in parts; no empty content chunk; calls numbered 0, 1, ...
//   node conformance.mjs ROOT_URL KEY SPEC   (MEMRA_NODE_DIR set; models "qwen" and "emb")
import { test } from "node:test";
import assert from "node:assert/strict";
import { anthropicValidator, openapiValidator, sseEvents } from "./spec_check.mjs";

const [root, key, specPath] = process.argv.slice(2);
assert.ok(root && key && specPath && process.env.MEMRA_NODE_DIR, "usage: ROOT_URL KEY SPEC");
const openai = await openapiValidator(specPath);
const anthropic = anthropicValidator();

const question = [{ role: "user", content: "What is the weather in Paris?" }];
const weatherParams = {
  type: "object",
  properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["celsius", "fahrenheit"] } },
  required: ["city", "unit"],
  additionalProperties: false,
};
const chatTool = { type: "function", function: { name: "get_weather", description: "Current weather of a city", parameters: weatherParams } };
const timeTool = { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { type: "string", maxLength: 8 } }, required: ["zone"] } } };

async function call(method, path, body, headers = {}) {
  const r = await fetch(root + path, {
    method,
    headers: { Authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "Content-Type": "application/json" }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  const type = r.headers.get("content-type") ?? "";
  return { status: r.status, type, text, json: type.startsWith("application/json") ? JSON.parse(text) : null };
}

// A JSON answer checked against the document's schema for the route (as the document writes it).
async function checked(method, path, route, body, status = 200) {
  const r = await call(method, path, body);
  assert.equal(r.status, status, `${method} ${path}: ${r.text}`);
  if (status === 200) openai.response(route, method.toLowerCase(), 200, "application/json", r.json);
  else openai.schema("ErrorResponse", r.json);
  return r.json;
}

// A streamed answer: every data event but [DONE] checked against `schema` (a component name),
// as `as` reads it; returns the parsed events.
async function streamed(path, body, schema, as = (d) => d) {
  const r = await call("POST", path, { ...body, stream: true });
  assert.equal(r.status, 200, r.text);
  assert.match(r.type, /^text\/event-stream/);
  const events = sseEvents(r.text);
  assert.equal(events.at(-1)?.data, "[DONE]", "the stream ends with [DONE]");
  const data = events.slice(0, -1).map((e) => e.data);
  for (const d of data) openai.schema(schema, as(d));
  return data;
}

// The tool-call deltas of a chat stream, and its checks: no empty content after the role chunk,
// each call's first delta has index, id, type, name and arguments "", indices 0, 1, ... in order.
function toolCallProtocol(chunks) {
  const calls = [];
  for (const c of chunks) {
    for (const choice of c.choices) {
      noEmptyContent(choice);
      for (const t of choice.delta?.tool_calls ?? []) {
        if (t.id !== undefined) {
          assert.equal(t.index, calls.length, "calls are numbered 0, 1, ... in order");
          assert.equal(t.type, "function");
          assert.equal(typeof t.function.name, "string");
          assert.equal(t.function.arguments, "", "the first delta of a call has no arguments yet");
          calls.push({ name: t.function.name, parts: [] });
        } else {
          assert.equal(t.index, calls.length - 1, "argument parts belong to the last call begun");
          assert.deepEqual(Object.keys(t), ["index", "function"]);
          calls.at(-1).parts.push(t.function.arguments);
        }
      }
    }
  }
  return calls;
}

// Only a choice's first chunk (its role) has an empty content.
function noEmptyContent(choice) {
  if (choice.delta?.role === undefined) assert.notEqual(choice.delta?.content, "", `an empty content chunk: ${JSON.stringify(choice)}`);
}

// A forced call of get_weather (greedy) cut inside its arguments: the max_tokens that ends two
// tokens after its head, found from the whole call's tokens (chat logprobs carry their bytes).
const head = '<tool_call>\n{"name": "get_weather", "arguments": ';
const namedWeather = { model: "qwen", messages: question, tools: [chatTool], tool_choice: { type: "function", function: { name: "get_weather" } }, temperature: 0 };
async function cutInsideArguments() {
  const r = await call("POST", "/v1/chat/completions", { ...namedWeather, max_tokens: 600, logprobs: true });
  let bytes = 0, tokens = 0;
  for (const t of r.json.choices[0].logprobs.content) {
    if (bytes >= head.length) break;
    bytes += t.bytes.length;
    tokens++;
  }
  assert.ok(tokens + 2 < r.json.usage.completion_tokens - 3, "the call is long enough to be cut inside its arguments");
  return tokens + 2;
}

test("models: list, retrieve, unknown", async () => {
  const list = await checked("GET", "/v1/models", "/models");
  assert.ok(list.data.some((m) => m.id === "qwen"));
  await checked("GET", "/v1/models/qwen", "/models/{model}");
  await checked("GET", "/v1/models/nope", "/models/{model}", undefined, 404);
});

test("chat completions: plain (n, logprobs, stop) and streamed with usage", async () => {
  const body = { model: "qwen", messages: question, max_tokens: 8, temperature: 0.8, seed: 3, n: 2, logprobs: true, top_logprobs: 2, stop: ["\u0000x"] };
  const whole = await checked("POST", "/v1/chat/completions", "/chat/completions", body);
  assert.equal(whole.choices.length, 2);
  const chunks = await streamed("/v1/chat/completions", { ...body, stream_options: { include_usage: true } }, "CreateChatCompletionStreamResponse");
  assert.ok(chunks.at(-1).usage && chunks.at(-1).choices.length === 0, "the usage chunk comes last");
  for (const c of chunks) c.choices.forEach(noEmptyContent);
});

test("chat completions with tools: calls whole and streamed, parts before the end, the protocol of OpenAI", async () => {
  let parted = 0;
  for (const seed of [1, 2, 3, 4]) {
    const body = { model: "qwen", messages: question, tools: [chatTool, timeTool], tool_choice: "required", temperature: 1, seed, max_tokens: 600 };
    const whole = await checked("POST", "/v1/chat/completions", "/chat/completions", body);
    const message = whole.choices[0].message;
    assert.equal(whole.choices[0].finish_reason, "tool_calls");
    assert.equal(message.content, null);
    const chunks = await streamed("/v1/chat/completions", body, "CreateChatCompletionStreamResponse");
    const calls = toolCallProtocol(chunks);
    assert.deepEqual(calls.map((c) => [c.name, c.parts.join("")]), message.tool_calls.map((c) => [c.function.name, c.function.arguments]));
    for (const c of calls) parted += c.parts.length > 1 ? 1 : 0;
    assert.equal(chunks.at(-1).choices[0].finish_reason, "tool_calls");
  }
  assert.ok(parted > 0, "arguments arrive in parts as they are written");
  // tool_choice auto offers the tools; a named function without parallel calls.
  await checked("POST", "/v1/chat/completions", "/chat/completions", { model: "qwen", messages: question, tools: [chatTool], max_tokens: 6, temperature: 0 });
  const named = { model: "qwen", messages: question, tools: [chatTool, timeTool], tool_choice: { type: "function", function: { name: "get_time" } }, parallel_tool_calls: false, temperature: 0, max_tokens: 300 };
  await checked("POST", "/v1/chat/completions", "/chat/completions", named);
  toolCallProtocol(await streamed("/v1/chat/completions", named, "CreateChatCompletionStreamResponse"));
});

test("a forced call cut by max_tokens: finish_reason length, the partial arguments, no markup in content", async () => {
  const body = { ...namedWeather, max_tokens: await cutInsideArguments() };
  const whole = await checked("POST", "/v1/chat/completions", "/chat/completions", body);
  const choice = whole.choices[0];
  assert.equal(choice.finish_reason, "length");
  assert.equal(choice.message.content, null);
  assert.equal(choice.message.tool_calls.length, 1);
  const full = await checked("POST", "/v1/chat/completions", "/chat/completions", { ...body, max_tokens: 600 });
  const args = choice.message.tool_calls[0].function.arguments;
  assert.ok(full.choices[0].message.tool_calls[0].function.arguments.startsWith(args), `${args} begins the whole call's arguments`);
  const chunks = await streamed("/v1/chat/completions", body, "CreateChatCompletionStreamResponse");
  const calls = toolCallProtocol(chunks);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].parts.join(""), args);
  assert.equal(chunks.at(-1).choices[0].finish_reason, "length");
  assert.ok(!chunks.some((c) => c.choices[0]?.delta?.content?.includes("<tool_call>")));
});

test("completions: plain (echo, logprobs) and streamed", async () => {
  const body = { model: "qwen", prompt: "Once upon a time", max_tokens: 6, temperature: 0, logprobs: 2 };
  await checked("POST", "/v1/completions", "/completions", body);
  await checked("POST", "/v1/completions", "/completions", { ...body, logprobs: undefined, echo: true, n: 2 });
  // The document gives /v1/completions no stream schema: a chunk is a CreateCompletionResponse
  // whose finish_reason and usage are null until the end (as OpenAI streams them).
  const whole = (c) => ({ ...c, usage: c.usage ?? undefined, choices: c.choices.map((x) => ({ ...x, finish_reason: x.finish_reason ?? "stop" })) });
  const chunks = await streamed("/v1/completions", { ...body, stream_options: { include_usage: true } }, "CreateCompletionResponse", whole);
  assert.ok(chunks.length >= 2);
});

test("responses: whole, every streamed event (text, function calls, cut), retrieve, delete", async () => {
  const r = await checked("POST", "/v1/responses", "/responses", { model: "qwen", input: "Hello", max_output_tokens: 6, temperature: 0, instructions: "Be brief." });
  await checked("GET", `/v1/responses/${r.id}`, "/responses/{response_id}");
  const tool = { type: "function", name: "get_weather", parameters: weatherParams, strict: true };
  const withTool = { model: "qwen", input: question, tools: [tool], tool_choice: "required", temperature: 1, seed: 2, max_output_tokens: 400 };
  const whole = await checked("POST", "/v1/responses", "/responses", withTool);
  const cut = { ...withTool, tool_choice: { type: "function", name: "get_weather" }, temperature: 0, max_output_tokens: await cutInsideArguments() };
  const incomplete = await checked("POST", "/v1/responses", "/responses", cut);
  assert.equal(incomplete.status, "incomplete");
  assert.deepEqual(incomplete.output.map((o) => [o.type, o.status]), [["function_call", "incomplete"]]);
  for (const [body, last] of [
    [{ model: "qwen", input: "Hello", max_output_tokens: 6, temperature: 0 }, null],
    [withTool, "response.completed"],
    [cut, "response.incomplete"],
  ]) {
    const res = await call("POST", "/v1/responses", { ...body, stream: true });
    assert.equal(res.status, 200, res.text);
    const events = sseEvents(res.text);
    events.forEach((e, i) => {
      assert.equal(e.event, e.data.type, "the event's name is its type");
      assert.equal(e.data.sequence_number, i);
      openai.response("/responses", "post", 200, "text/event-stream", e.data);
    });
    if (last) assert.equal(events.at(-1).event, last);
    if (body.tools) {
      const added = events.find((e) => e.event === "response.output_item.added" && e.data.item.type === "function_call");
      assert.ok(added, "a function_call item is added");
      assert.equal(added.data.item.arguments, "");
      const deltas = events.filter((e) => e.event === "response.function_call_arguments.delta" && e.data.item_id === added.data.item.id);
      const done = events.find((e) => e.event === "response.function_call_arguments.done" && e.data.item_id === added.data.item.id);
      assert.equal(done.data.arguments, deltas.map((e) => e.data.delta).join(""));
      if (last === "response.completed") {
        assert.ok(deltas.length > 1, "the arguments stream in parts");
        assert.equal(done.data.arguments, whole.output.find((o) => o.type === "function_call").arguments);
      } else {
        const item = events.findLast((e) => e.event === "response.output_item.done").data.item;
        assert.equal(item.status, "incomplete");
      }
    }
  }
  const deleted = await call("DELETE", `/v1/responses/${r.id}`);
  assert.deepEqual(deleted.json, { id: r.id, object: "response", deleted: true });
  await checked("GET", `/v1/responses/${r.id}`, "/responses/{response_id}", undefined, 404);
});

test("embeddings: float and base64", async () => {
  await checked("POST", "/v1/embeddings", "/embeddings", { model: "emb", input: ["Hello", "world"] });
  // The document's Embedding is the float form only; base64 (a string, as OpenAI sends it) is
  // checked as the floats it holds.
  const r = await call("POST", "/v1/embeddings", { model: "emb", input: "Hello", encoding_format: "base64" });
  assert.equal(r.status, 200, r.text);
  for (const d of r.json.data) {
    assert.equal(typeof d.embedding, "string");
    const b = Buffer.from(d.embedding, "base64");
    d.embedding = Array.from(new Float32Array(b.buffer, b.byteOffset, b.length / 4));
  }
  openai.response("/embeddings", "post", 200, "application/json", r.json);
});

test("errors: 4xx error objects of every kind", async () => {
  const bad = [
    ["POST", "/v1/chat/completions", { model: "qwen", messages: question, temperature: 7 }, 400],
    ["POST", "/v1/chat/completions", { model: "nope", messages: question }, 404],
    ["POST", "/v1/completions", { model: "qwen" }, 400],
    ["POST", "/v1/responses", { model: "qwen", input: 5 }, 400],
    ["POST", "/v1/embeddings", { model: "emb", input: [] }, 400],
    ["GET", "/v1/nowhere", undefined, 404],
  ];
  for (const [method, path, body, status] of bad) {
    const r = await call(method, path, body);
    assert.equal(r.status, status, `${method} ${path}: ${r.text}`);
    openai.schema("ErrorResponse", r.json);
  }
  const unauthorized = await fetch(root + "/v1/models");
  assert.equal(unauthorized.status, 401);
  openai.schema("ErrorResponse", await unauthorized.json());
  const notJson = await call("POST", "/v1/chat/completions", undefined, { "Content-Type": "text/plain" });
  assert.equal(notJson.status, 415);
  openai.schema("ErrorResponse", notJson.json);
});

test(`messages (@anthropic-ai/sdk ${anthropic.version} types): whole, every streamed event, tools, count_tokens, errors`, async () => {
  const tools = [{ name: "get_weather", description: "Current weather of a city", input_schema: weatherParams }];
  const bodies = [
    { model: "qwen", max_tokens: 8, temperature: 0, system: "Be brief.", messages: question },
    { model: "qwen", max_tokens: 400, temperature: 1, top_k: 40, messages: question, tools, tool_choice: { type: "any" } },
    { model: "qwen", max_tokens: await cutInsideArguments(), temperature: 0, messages: question, tools, tool_choice: { type: "tool", name: "get_weather" } },
  ];
  for (const body of bodies) {
    const whole = await call("POST", "/v1/messages", body);
    assert.equal(whole.status, 200, whole.text);
    anthropic.check("Message", whole.json);
    const res = await call("POST", "/v1/messages", { ...body, stream: true });
    assert.equal(res.status, 200, res.text);
    const parts = [];  // per block: input_json_delta events
    for (const e of sseEvents(res.text)) {
      assert.equal(e.event, e.data.type, "the event's name is its type");
      if (e.event === "ping") assert.deepEqual(e.data, { type: "ping" });
      else anthropic.check("RawMessageStreamEvent", e.data);
      if (e.data.delta?.type === "input_json_delta") parts[e.data.index] = (parts[e.data.index] ?? 0) + 1;
    }
    if (body.tools && body.max_tokens > 100) assert.ok(parts.some((n) => n > 1), "tool input streams in parts");
  }
  const cut = await call("POST", "/v1/messages", bodies[2]);
  assert.equal(cut.json.stop_reason, "max_tokens");
  assert.deepEqual(cut.json.content.map((b) => b.type), ["tool_use"], "a cut call is a tool_use block, never text");
  const counted = await call("POST", "/v1/messages/count_tokens", { model: "qwen", messages: question, tools });
  assert.equal(counted.status, 200, counted.text);
  anthropic.check("MessageTokensCount", counted.json);
  for (const [body, status] of [[{ model: "qwen", messages: question }, 400], [{ model: "nope", max_tokens: 4, messages: question }, 404]]) {
    const r = await call("POST", "/v1/messages", body);
    assert.equal(r.status, status, r.text);
    anthropic.check("ErrorResponse", r.json);
    assert.match(r.json.request_id, /^req-/);
  }
});
