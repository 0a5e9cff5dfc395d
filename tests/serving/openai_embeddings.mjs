// /v1/embeddings through the real `openai` npm client (tests/node/node_modules), against
// transformers' reference vectors of the committed embedding model. Run by
// serving_embeddings_test.cpp:
//   node openai_embeddings.mjs BASE_URL MODEL REFERENCE_JSON MAX_DIFF
// with MEMRA_NODE_DIR set (MAX_DIFF: tests/support/logits.hpp, kBf16EmbeddingMaxDiff). Exits non-zero when any test fails.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [baseURL, model, referencePath, maxDiffArg] = process.argv.slice(2);
const nodeDir = process.env.MEMRA_NODE_DIR;
const maxDiff = Number(maxDiffArg);
assert.ok(baseURL && model && referencePath && nodeDir && maxDiff > 0, "usage: BASE_URL MODEL REFERENCE_JSON MAX_DIFF (MEMRA_NODE_DIR)");
const { default: OpenAI } = await import(pathToFileURL(path.join(nodeDir, "node_modules/openai/index.mjs")).href);

const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
const cases = JSON.parse(fs.readFileSync(referencePath, "utf8")).cases;

function assertClose(got, want, what) {
  assert.equal(got.length, want.length, `${what}: length`);
  let worst = 0;
  for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  assert.ok(worst <= maxDiff, `${what}: max |diff| ${worst} > ${maxDiff}`);
}

// The client asks for base64 by default and decodes it: memra's little-endian float32 bytes.
test("embeddings.create returns the reference vectors (the client's default base64)", async () => {
  const r = await client.embeddings.create({ model, input: cases.map((c) => c.text) });
  assert.equal(r.object, "list");
  assert.equal(r.model, model);
  assert.equal(r.data.length, cases.length);
  const tokens = cases.reduce((n, c) => n + c.input_ids.length, 0);
  assert.deepEqual(r.usage, { prompt_tokens: tokens, total_tokens: tokens });
  r.data.forEach((d, i) => {
    assert.equal(d.object, "embedding");
    assert.equal(d.index, i);
    assertClose(d.embedding, cases[i].embedding, cases[i].text);
  });
});

test("encoding_format float and dimensions 64 (Matryoshka: cut, then renormalised)", async () => {
  const r = await client.embeddings.create({ model, input: cases.map((c) => c.text), encoding_format: "float", dimensions: 64 });
  r.data.forEach((d, i) => assertClose(d.embedding, cases[i].embedding_64, cases[i].text));
});

test("token ids in, the same vectors out", async () => {
  const r = await client.embeddings.create({ model, input: cases.map((c) => c.input_ids), encoding_format: "float" });
  r.data.forEach((d, i) => assertClose(d.embedding, cases[i].embedding, cases[i].text));
});

test("a generation model is refused with a 400", async () => {
  await assert.rejects(client.embeddings.create({ model: "memra-tiny-random", input: "x" }), (e) => e.status === 400);
});
