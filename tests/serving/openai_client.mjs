// memra-host through the real `openai` npm client (tests/node/node_modules).
// Run by serving_openai_test.cpp:
//   node openai_client.mjs BASE_URL GOOD_KEY DISABLED_KEY TIGHT_KEY
// with MEMRA_NODE_DIR set. The TIGHT key's tenant may run one request at a time
// and never waits (queue_timeout_ms 0). Exits non-zero when any test fails.
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [baseURL, goodKey, disabledKey, tightKey] = process.argv.slice(2);
const nodeDir = process.env.MEMRA_NODE_DIR;
assert.ok(baseURL && goodKey && disabledKey && tightKey && nodeDir, "usage: BASE_URL GOOD DISABLED TIGHT (MEMRA_NODE_DIR)");
const { default: OpenAI } = await import(pathToFileURL(path.join(nodeDir, "node_modules/openai/index.mjs")).href);

const MODEL = "memra-tiny-random";
const client = new OpenAI({ baseURL, apiKey: goodKey, maxRetries: 0, timeout: 60_000 });
const hello = [{ role: "user", content: "Tell me a story about a small robot." }];

async function chatText(params) {
  const r = await client.chat.completions.create({ model: MODEL, messages: hello, ...params });
  return r.choices[0].message.content;
}

async function collectStream(stream) {
  const texts = new Map();
  const finish = new Map();
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      const piece = c.delta ? c.delta.content ?? "" : c.text ?? "";
      texts.set(c.index, (texts.get(c.index) ?? "") + piece);
      if (c.finish_reason) finish.set(c.index, c.finish_reason);
    }
  }
  return { texts, finish, usage, chunks };
}

async function metric(name, labels = {}) {
  const res = await fetch(baseURL.replace(/\/v1$/, "") + "/metrics", { headers: { Authorization: `Bearer ${goodKey}` } });
  const text = await res.text();
  let value = null;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name + "{") && !line.startsWith(name + " ")) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) value = Number(line.split(" ").pop());
  }
  return value;
}

test("models.list names the served model", async () => {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  assert.deepEqual(ids, [MODEL]);
  assert.equal(list.data[0].object, "model");
});

test("chat completion: shape and usage", async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: hello, max_tokens: 8, temperature: 0 });
  assert.equal(r.object, "chat.completion");
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, MODEL);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 8);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, "number");
  // Content parts of type text are the same as the string.
  const parts = await client.chat.completions.create({
    model: MODEL, max_tokens: 8, temperature: 0,
    messages: [{ role: "user", content: [{ type: "text", text: hello[0].content }] }],
  });
  assert.equal(parts.choices[0].message.content, r.choices[0].message.content);
});

test("completions: string, strings, token ids, n", async () => {
  const one = await client.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 6, temperature: 0 });
  assert.equal(one.object, "text_completion");
  assert.equal(one.choices.length, 1);
  assert.equal(typeof one.choices[0].text, "string");
  const two = await client.completions.create({ model: MODEL, prompt: ["Once upon a time", "In the beginning"], max_tokens: 6, temperature: 0 });
  assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
  assert.equal(two.choices[0].text, one.choices[0].text, "a prompt's answer does not depend on the other prompt");
  // Token ids give the same answer as the text they encode.
  const tok = await fetch(baseURL.replace(/\/v1$/, "") + "/tokenize", {
    method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${goodKey}` },
    body: JSON.stringify({ model: MODEL, prompt: "Once upon a time" }),
  }).then((r) => r.json());
  assert.equal(tok.count, tok.tokens.length);
  const ids = await client.completions.create({ model: MODEL, prompt: tok.tokens, max_tokens: 6, temperature: 0 });
  assert.equal(ids.choices[0].text, one.choices[0].text);
  const nested = await client.completions.create({ model: MODEL, prompt: [tok.tokens, tok.tokens], max_tokens: 6, temperature: 0 });
  assert.deepEqual(nested.choices.map((c) => c.text), [one.choices[0].text, one.choices[0].text]);
  const detok = await fetch(baseURL.replace(/\/v1$/, "") + "/detokenize", {
    method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${goodKey}` },
    body: JSON.stringify({ model: MODEL, tokens: tok.tokens }),
  }).then((r) => r.json());
  assert.equal(detok.prompt, "Once upon a time");
  // Echo puts the prompt in front.
  const echo = await client.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 6, temperature: 0, echo: true });
  assert.equal(echo.choices[0].text, "Once upon a time" + one.choices[0].text);
});

test("streaming chat with include_usage equals the whole answer", async () => {
  const params = { max_tokens: 12, temperature: 0.8, seed: 7 };
  const whole = await client.chat.completions.create({ model: MODEL, messages: hello, ...params });
  const stream = await client.chat.completions.create({
    model: MODEL, messages: hello, ...params, stream: true, stream_options: { include_usage: true },
  });
  const got = await collectStream(stream);
  assert.equal(got.texts.get(0), whole.choices[0].message.content);
  assert.equal(got.finish.get(0), whole.choices[0].finish_reason);
  assert.ok(got.usage, "the last chunk carries usage");
  assert.equal(got.usage.completion_tokens, whole.usage.completion_tokens);
  assert.equal(got.usage.prompt_tokens, whole.usage.prompt_tokens);
  assert.ok(got.chunks >= 3);
});

test("streaming completions, n=2", async () => {
  const params = { model: MODEL, prompt: "The weather today", max_tokens: 10, temperature: 1, seed: 99, n: 2 };
  const whole = await client.completions.create(params);
  const got = await collectStream(await client.completions.create({ ...params, stream: true }));
  assert.equal(got.usage, null, "no usage chunk unless asked");
  for (const c of whole.choices) {
    assert.equal(got.texts.get(c.index), c.text);
    assert.equal(got.finish.get(c.index), c.finish_reason);
  }
});

test("stop strings end the answer before them, streamed or not", async () => {
  const full = await chatText({ max_tokens: 48, temperature: 0 });
  // A short ASCII piece of the greedy answer that starts after its first character.
  let stop = null;
  for (let i = 1; i + 2 <= full.length && !stop; i++) {
    const s = full.slice(i, i + 2);
    if (/^[\x21-\x7e]{2}$/.test(s)) stop = s;
  }
  assert.ok(stop, `no ASCII pair in ${JSON.stringify(full)}`);
  const expected = full.slice(0, full.indexOf(stop));
  const r = await client.chat.completions.create({ model: MODEL, messages: hello, max_tokens: 48, temperature: 0, stop: [stop, "\u0000never"] });
  assert.equal(r.choices[0].message.content, expected);
  assert.equal(r.choices[0].finish_reason, "stop");
  const got = await collectStream(await client.chat.completions.create({ model: MODEL, messages: hello, max_tokens: 48, temperature: 0, stop, stream: true }));
  assert.equal(got.texts.get(0), expected);
  assert.equal(got.finish.get(0), "stop");
  assert.ok(!got.texts.get(0).includes(stop));
});

test("n choices: choice i is seed + i", async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: hello, max_tokens: 8, n: 3, seed: 1000, temperature: 1 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  for (let i = 0; i < 3; i++) {
    assert.equal(r.choices[i].message.content, await chatText({ max_tokens: 8, seed: 1000 + i, temperature: 1 }));
  }
  assert.ok(r.usage.completion_tokens <= 24);
});

test("seeds: same seed same text; different seeds differ", async () => {
  const a = await chatText({ max_tokens: 16, temperature: 1, seed: 42 });
  const b = await chatText({ max_tokens: 16, temperature: 1, seed: 42 });
  assert.equal(a, b);
  const others = await Promise.all([43, 44, 45].map((seed) => chatText({ max_tokens: 16, temperature: 1, seed })));
  assert.ok(others.some((t) => t !== a), "three other seeds all gave the same text");
});

test("logprobs: chat shape", async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: hello, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens - (r.choices[0].finish_reason === "stop" ? 1 : 0));
  for (const e of content) {
    assert.equal(typeof e.token, "string");
    assert.ok(e.logprob <= 0);
    assert.ok(Array.isArray(e.bytes));
    assert.equal(e.top_logprobs.length, 3);
    for (let k = 1; k < 3; k++) assert.ok(e.top_logprobs[k - 1].logprob >= e.top_logprobs[k].logprob);
    // Greedy: the chosen token is the most likely one.
    assert.equal(e.logprob, e.top_logprobs[0].logprob);
  }
  const bytes = Buffer.from(content.flatMap((e) => e.bytes));
  if (!r.choices[0].message.content.includes("\ufffd")) assert.equal(bytes.toString("utf8"), r.choices[0].message.content);
});

test("logprobs: completions legacy shape", async () => {
  const r = await client.completions.create({ model: MODEL, prompt: "Hello there", max_tokens: 6, temperature: 0, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, lp.token_logprobs.length);
  assert.equal(lp.tokens.length, lp.top_logprobs.length);
  assert.equal(lp.tokens.length, lp.text_offset.length);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 1; i < lp.text_offset.length; i++) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
  for (const alts of lp.top_logprobs) assert.ok(Object.keys(alts).length >= 1 && Object.keys(alts).length <= 2);
  if (!r.choices[0].text.includes("\ufffd")) assert.equal(lp.tokens.join(""), r.choices[0].text);
});

test("errors surface as the client's error classes", async () => {
  await assert.rejects(client.chat.completions.create({ model: MODEL, messages: hello, temperature: 5 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.status, 400);
    assert.equal(e.param, "temperature");
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: MODEL, messages: hello, max_tokens: 100000 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.code, "context_length_exceeded");
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: MODEL, messages: hello, tools: [{ type: "function", function: { name: "f" } }] }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === "tools");
  await assert.rejects(client.chat.completions.create({ model: "no-such-model", messages: hello }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === "model_not_found");
  const stranger = new OpenAI({ baseURL, apiKey: "sk-not-a-key", maxRetries: 0 });
  await assert.rejects(stranger.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  const disabled = new OpenAI({ baseURL, apiKey: disabledKey, maxRetries: 0 });
  await assert.rejects(disabled.chat.completions.create({ model: MODEL, messages: hello }),
    (e) => e instanceof OpenAI.PermissionDeniedError && e.status === 403);
});

test("a tenant over its limit gets RateLimitError; a hung-up stream frees its slot", async () => {
  const tight = new OpenAI({ baseURL, apiKey: tightKey, maxRetries: 0 });
  const controller = new AbortController();
  // Long enough to still run while the second request arrives (ignore_eos is a memra extension).
  const stream = await tight.chat.completions.create(
    { model: MODEL, messages: hello, max_tokens: 3000, stream: true, ignore_eos: true },
    { signal: controller.signal });
  const it = stream[Symbol.asyncIterator]();
  await it.next();  // the role chunk: the request is admitted and running
  await it.next();
  await assert.rejects(tight.chat.completions.create({ model: MODEL, messages: hello, max_tokens: 2 }), (e) => {
    assert.ok(e instanceof OpenAI.RateLimitError, String(e));
    assert.equal(e.status, 429);
    assert.ok(Number(e.headers.get("retry-after")) >= 1);
    return true;
  });
  controller.abort();
  // The server notices the hang-up, cancels the sequence and releases the tenant's slot.
  let ok = null;
  for (let i = 0; i < 100 && !ok; i++) {
    await new Promise((r) => setTimeout(r, 50));
    try {
      ok = await tight.chat.completions.create({ model: MODEL, messages: hello, max_tokens: 2 });
    } catch (e) {
      if (!(e instanceof OpenAI.RateLimitError)) throw e;
    }
  }
  assert.ok(ok, "the tenant's slot was not released after the client hung up");
  let running = null;
  for (let i = 0; i < 100 && running !== 0; i++) {
    running = await metric("memra_scheduler_running", { model: MODEL });
    if (running !== 0) await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(running, 0);
});
