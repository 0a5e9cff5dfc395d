// The openai npm client over HTTPS against memra-host with --tls-cert/--tls-key.
// Run by serving_tls_test.cpp:  NODE_EXTRA_CA_CERTS=c.pem node tls_client.mjs BASE_URL
// (BASE_URL https://localhost:PORT/v1), with MEMRA_NODE_DIR set. Exits non-zero when any test fails.
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [baseURL] = process.argv.slice(2);
const nodeDir = process.env.MEMRA_NODE_DIR;
assert.ok(baseURL && baseURL.startsWith("https://") && nodeDir, "usage: BASE_URL (https://...) with MEMRA_NODE_DIR");
const { default: OpenAI } = await import(pathToFileURL(path.join(nodeDir, "node_modules/openai/index.mjs")).href);

const MODEL = "memra-tiny-random";
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
const messages = [{ role: "user", content: "Tell me a story about a small robot." }];

test("chat completion over TLS", async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 8, ignore_eos: true });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 8);
  assert.ok(r.choices[0].message.content.length > 0);
});

test("streamed chat completion over TLS", async () => {
  const stream = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 8, ignore_eos: true, stream: true, stream_options: { include_usage: true },
  });
  let text = "", finish = null, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(finish, "length");
  assert.equal(usage.completion_tokens, 8);
  assert.ok(text.length > 0);
});
