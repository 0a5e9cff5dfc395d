// Reference token ids and decodes for the memra tokenizer tests.
//
// usage: node oracle.mjs <node_dir> <corpus.jsonl> <name>=<model_dir>[+<overrides.json>] ...
//
// For every tokenizer and every corpus line it prints (one JSON object on stdout):
//   lenml.<name>[i] = {ids, ids_plain, decode, decode_skip, decode_plain}
// from @lenml/tokenizers (transformers.js), and the same under hf.<name> from the Hugging Face
// `tokenizers` Rust library (npm package `tokenizers`) when it can be loaded from <node_dir>/node_modules
// or from $MEMRA_HF_TOKENIZERS_DIR; otherwise hf is null.
//   ids        encode(text, add_special_tokens = true)
//   ids_plain  encode(text, add_special_tokens = false)
//   decode      decode(ids)         decode_skip  decode(ids, skip_special_tokens)
//   decode_plain decode(ids_plain)
// <overrides.json> (optional) is merged over the top level of tokenizer.json, so one vocabulary can be
// run with other normalizer / pre-tokenizer / decoder settings.
//
// It also encodes pseudo-random texts assembled from pieces that stress the splitting rules:
// fuzz.<name>[k] = {text, lenml, hf} (ids with add_special_tokens = true). And it decodes pseudo-random id
// sequences (seeded, biased towards single-byte tokens and added tokens,
// so invalid UTF-8 and byte-fallback runs occur): random.<name>[k] = {ids, lenml, lenml_skip, hf, hf_skip}.
//
// Corpus lines are JSON strings. A UTF-8 API cannot carry lone UTF-16 surrogates, so both this script
// and the C++ test replace them with U+FFFD (String.prototype.toWellFormed) before encoding.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const [nodeDir, corpusPath, ...specs] = process.argv.slice(2);
if (!nodeDir || !corpusPath || specs.length === 0) {
  console.error("usage: node oracle.mjs <node_dir> <corpus.jsonl> <name>=<model_dir>[+<overrides.json>] ...");
  process.exit(2);
}

const lenmlEntry = path.join(nodeDir, "node_modules/@lenml/tokenizers/dist/main.mjs");
const { TokenizerLoader } = await import(pathToFileURL(lenmlEntry).href);

function loadHf() {
  const dirs = [path.join(nodeDir, "node_modules"), process.env.MEMRA_HF_TOKENIZERS_DIR].filter(Boolean);
  for (const d of dirs) {
    try {
      return createRequire(path.join(d, "noop.js"))("tokenizers");
    } catch {
      // not installed there
    }
  }
  return null;
}
const hf = loadHf();

const texts = fs
  .readFileSync(corpusPath, "utf8")
  .split("\n")
  .filter((l) => l.length > 0)
  .map((l) => JSON.parse(l).toWellFormed());

// mulberry32: a small seeded PRNG, so the random sequences are the same on every run.
function rng(seed) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// GPT-2 byte -> character table (to find the ids of single-byte tokens of byte-level vocabularies).
function byteChars() {
  const bs = [];
  for (let b = 33; b <= 126; ++b) bs.push(b);
  for (let b = 161; b <= 172; ++b) bs.push(b);
  for (let b = 174; b <= 255; ++b) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; ++b)
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  const map = new Array(256);
  bs.forEach((b, i) => (map[b] = String.fromCodePoint(cs[i])));
  return map;
}

function randomSequences(tokJson, count) {
  const vocab = tokJson.model.vocab;
  let maxId = 0;
  for (const k in vocab) maxId = Math.max(maxId, vocab[k]);
  for (const a of tokJson.added_tokens) maxId = Math.max(maxId, a.id);
  const interesting = [];
  const chars = byteChars();
  for (let b = 0; b < 256; ++b) {
    const hex = "<0x" + b.toString(16).toUpperCase().padStart(2, "0") + ">";
    if (hex in vocab) interesting.push(vocab[hex]);
    if (chars[b] in vocab) interesting.push(vocab[chars[b]]);
  }
  for (const a of tokJson.added_tokens.slice(0, 64)) interesting.push(a.id);
  const r = rng(1234);
  const seqs = [];
  for (let k = 0; k < count; ++k) {
    const len = 1 + Math.floor(r() * 16);
    const ids = [];
    for (let i = 0; i < len; ++i)
      ids.push(r() < 0.6 ? interesting[Math.floor(r() * interesting.length)] : Math.floor(r() * (maxId + 1)));
    seqs.push(ids);
  }
  return seqs;
}

const FUZZ_PIECES = [
  "a", "b", "Z", "the", "The", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", "1", "23", "4567", ".", ",", "!",
  "?", "'", "'s", "'T", "'ll", "-", "_", "(", ")", "$", "\u20ac", "{", "}", "\\", "\"", "@", "#", "\u00e9", "e\u0301",
  "\u00df", "\u4e2d", "\u6587", "\u65e5\u672c", "\ud55c", "\u0301", "\u200d", "\u200b", "\ud83d\ude00",
  "\ud83d\udc4d\ud83c\udffd", "\ud83c\uddfa\ud83c\uddf8", "\u2581", "\u00a0", "\u3000", "\u017f", "\u212a", "\u0085", "\ufeff",
  "\u0661\u0662", "\u0915\u093e", "\u0e2a\u0e27", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<bos>",
  "<start_of_turn>", "<end_of_turn>", "<|begin_of_text|>", "<|eot_id|>", "<think>", "</think>", "<0x41>", "<unused7>",
  "<table>", "<|im_start", "|>", "<", ">",
];

function fuzzTexts(count) {
  const r = rng(99);
  const texts = [];
  for (let k = 0; k < count; ++k) {
    let t = "";
    for (let i = 0, n = 1 + Math.floor(r() * 24); i < n; ++i) t += FUZZ_PIECES[Math.floor(r() * FUZZ_PIECES.length)];
    texts.push(t);
  }
  return texts;
}
const fuzz = fuzzTexts(400);

const out = { lenml: {}, hf: hf ? {} : null, random: {}, fuzz: {} };
for (const spec of specs) {
  const [name, rest] = spec.split("=");
  const [dir, overridesPath] = rest.split("+");
  const tokJson = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const config = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  const overrides = overridesPath ? JSON.parse(fs.readFileSync(overridesPath, "utf8")) : {};
  Object.assign(tokJson, overrides);

  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: tokJson, tokenizerConfig: config });
  const dec = (ids, skip) => (ids.length === 0 ? "" : tok.decode(ids, { skip_special_tokens: skip }));
  out.lenml[name] = texts.map((t) => {
    const ids = tok.encode(t, { add_special_tokens: true });
    const ids_plain = tok.encode(t, { add_special_tokens: false });
    return { ids, ids_plain, decode: dec(ids, false), decode_skip: dec(ids, true), decode_plain: dec(ids_plain, false) };
  });

  const fuzzRows = fuzz.map((text) => ({ text, lenml: tok.encode(text, { add_special_tokens: true }) }));
  out.fuzz[name] = fuzzRows;

  const seqs = randomSequences(tokJson, 200);
  const randomRows = seqs.map((ids) => ({ ids, lenml: dec(ids, false), lenml_skip: dec(ids, true) }));
  out.random[name] = randomRows;

  if (hf) {
    const rs = hf.Tokenizer.fromString(JSON.stringify(tokJson));
    for (const row of fuzzRows) row.hf = (await rs.encode(row.text, null, { addSpecialTokens: true })).getIds();
    for (const row of randomRows) {
      row.hf = await rs.decode(row.ids, false);
      row.hf_skip = await rs.decode(row.ids, true);
    }
    const rows = [];
    for (const t of texts) {
      const ids = (await rs.encode(t, null, { addSpecialTokens: true })).getIds();
      const ids_plain = (await rs.encode(t, null, { addSpecialTokens: false })).getIds();
      rows.push({
        ids,
        ids_plain,
        decode: await rs.decode(ids, false),
        decode_skip: await rs.decode(ids, true),
        decode_plain: await rs.decode(ids_plain, false),
      });
    }
    out.hf[name] = rows;
  }
}
process.stdout.write(JSON.stringify(out));
