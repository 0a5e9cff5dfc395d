// Validators for what memra-host sends, against the APIs' own definitions:
//   openapiValidator(specPath)  the OpenAI OpenAPI document (../shared/specs/openai-openapi.yml,
//                               read with js-yaml): a route's response schema, or a named one
//   anthropicValidator()        @anthropic-ai/sdk's TypeScript types (its .d.ts files, read as
//                               JSON Schema: interfaces, unions, literals, arrays, nullables)
//   sseEvents(text)             a text/event-stream body as [{event, data}] (data parsed)
// Each validator's check(...) throws an assertion naming the schema, the data and ajv's errors.
// Needs MEMRA_NODE_DIR (tests/node) for ajv, js-yaml and the SDK.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const nodeDir = process.env.MEMRA_NODE_DIR;
const modules = (p) => path.join(nodeDir, "node_modules", p);
const load = (p) => import(pathToFileURL(modules(p)).href);
const { default: Ajv } = await load("ajv/dist/2020.js");

function newAjv() {
  // The documents carry keywords of their own (discriminator, x-oaiMeta, example): ignored.
  return new Ajv({ strict: false, validateSchema: false, validateFormats: false, allErrors: true });
}

function failure(what, data, errors) {
  const shown = JSON.stringify(data);
  return `${what}: ${JSON.stringify(errors?.slice(0, 8), null, 1)}\n  in ${shown.length > 3000 ? shown.slice(0, 3000) + "..." : shown}`;
}

// OpenAPI 3.0's `nullable: true` (the document mixes it with 3.1's type lists) as JSON Schema.
function jsonSchemaOf(node) {
  if (Array.isArray(node)) return node.map(jsonSchemaOf);
  if (node === null || typeof node !== "object") return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) out[k] = jsonSchemaOf(v);
  if (!("nullable" in out)) return out;
  const nullable = out.nullable === true;
  delete out.nullable;
  if (!nullable) return out;
  if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum.push(null);
  if (typeof out.type === "string") out.type = [out.type, "null"];
  else if (Array.isArray(out.type)) out.type.includes("null") || out.type.push("null");
  else return { anyOf: [out, { type: "null" }] };
  return out;
}

export async function openapiValidator(specPath) {
  const yaml = await load("js-yaml/dist/js-yaml.mjs");
  const spec = jsonSchemaOf(yaml.load(fs.readFileSync(specPath, "utf8")));
  const ajv = newAjv();
  ajv.addSchema(spec, "openapi");
  const byRef = (ref) => {
    const v = ajv.getSchema("openapi" + ref);
    assert.ok(v, `no schema ${ref} in the OpenAPI document`);
    return v;
  };
  return {
    spec,
    // A named component schema (components/schemas/NAME).
    schema(name, data) {
      const v = byRef(`#/components/schemas/${name}`);
      assert.ok(v(data), failure(name, data, v.errors));
    },
    // The schema the document gives for this route's answer: paths[route][method].responses[status]
    // .content[contentType].schema (route as the document writes it, e.g. "/models/{model}").
    response(route, method, status, contentType, data) {
      const op = spec.paths[route]?.[method];
      assert.ok(op, `the OpenAPI document has no ${method} ${route}`);
      const r = op.responses[String(status)];
      const schema = r?.content?.[contentType]?.schema;
      assert.ok(schema?.$ref, `the OpenAPI document gives no ${contentType} schema for ${status} of ${method} ${route}`);
      const v = byRef(schema.$ref);
      assert.ok(v(data), failure(`${method} ${route} ${status} ${contentType} (${schema.$ref})`, data, v.errors));
    },
  };
}

// ---- @anthropic-ai/sdk's .d.ts as JSON Schema ----

// Splits `text` at top-level occurrences of `sep` (outside <>, {}, (), [] and quotes).
function splitTop(text, sep) {
  const parts = [];
  let depth = 0, quote = null, start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote && text[i - 1] !== "\\") quote = null;
      continue;
    }
    if (c === "'" || c === '"') quote = c;
    else if ("<{([".includes(c)) depth++;
    else if (">})]".includes(c) && !(c === ">" && text[i - 1] === "=")) depth--;
    else if (depth === 0 && text.startsWith(sep, i)) {
      parts.push(text.slice(start, i));
      start = i + sep.length;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p !== "");
}

// The text between the brace at `open` and its match.
function braced(text, open) {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === "{") depth++;
    else if (text[i] === "}" && --depth === 0) return text.slice(open + 1, i);
  }
  throw new Error("unbalanced braces in a .d.ts");
}

// Declarations of a .d.ts: name -> {kind: "interface", body, extends} | {kind: "type", text};
// a namespace's members are NS.Name.
function declarations(source, into, prefix = "") {
  const text = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const re = /(?:export\s+)?(?:declare\s+)?(interface|type|namespace|class)\s+([A-Za-z_$][\w$]*)(?:<[^>]*>)?\s*(extends\s+[^{]+)?(=|\{)/g;
  let m;
  while ((m = re.exec(text))) {
    const [, kind, name, ext, opener] = m;
    const full = prefix + name;
    if (opener === "=") {
      const end = re.lastIndex + splitTop(text.slice(re.lastIndex), ";")[0].length + 1;
      into.set(full, { kind: "type", text: text.slice(re.lastIndex, end).trim(), scope: prefix });
      re.lastIndex = end;
    } else {
      const open = re.lastIndex - 1;
      const body = braced(text, open);
      if (kind === "interface") into.set(full, { kind, body, scope: prefix, extends: ext ? splitTop(ext.replace(/^extends/, ""), ",") : [] });
      else if (kind === "namespace") declarations(body, into, full + ".");
      re.lastIndex = open + body.length + 2;
    }
  }
}

class DtsSchemas {
  constructor(files) {
    this.decls = new Map();
    for (const f of files) declarations(fs.readFileSync(f, "utf8"), this.decls);
    this.defs = {};
    this.unresolved = new Set();
  }
  resolve(name, scope) {
    for (const candidate of [scope + name, name, name.split(".").slice(1).join("."), name.split(".").at(-1)])
      if (candidate && this.decls.has(candidate)) return candidate;
    return null;
  }
  ref(name) {
    if (!(name in this.defs)) {
      this.defs[name] = {};  // (recursion)
      const d = this.decls.get(name);
      this.defs[name] = d.kind === "interface"
        ? (d.extends.length ? { allOf: [...d.extends.map((e) => this.type(e, d.scope)), this.object(d.body, d.scope)] } : this.object(d.body, d.scope))
        : this.type(d.text, d.scope);
    }
    return { $ref: `#/$defs/${name}` };
  }
  object(body, scope) {
    const properties = {}, required = [];
    for (const member of splitTop(body, ";")) {
      const m = /^(?:readonly\s+)?([A-Za-z_$][\w$]*|'[^']*'|"[^"]*")(\??):\s*([\s\S]+)$/.exec(member);
      if (!m) continue;  // index signatures, methods
      const key = m[1].replace(/^['"]|['"]$/g, "");
      properties[key] = this.type(m[3], scope);
      if (!m[2]) required.push(key);
    }
    return { type: "object", properties, required };
  }
  type(text, scope) {
    text = text.trim();
    const union = splitTop(text, "|");
    if (union.length > 1) return { anyOf: union.map((t) => this.type(t, scope)) };
    const both = splitTop(text, "&");
    if (both.length > 1) return { allOf: both.map((t) => this.type(t, scope)) };
    if (text.startsWith("(") && text.endsWith(")")) return this.type(text.slice(1, -1), scope);
    if (/^'.*'$|^".*"$/.test(text)) return { const: text.slice(1, -1) };
    if (/^-?\d+(\.\d+)?$/.test(text)) return { const: Number(text) };
    if (text === "true" || text === "false") return { const: text === "true" };
    const simple = { string: { type: "string" }, number: { type: "number" }, boolean: { type: "boolean" }, null: { type: "null" } };
    if (text in simple) return simple[text];
    if (["unknown", "any", "object", "{}"].includes(text)) return {};
    if (text.startsWith("{")) return this.object(braced(text, 0), scope);
    if (text.endsWith("[]")) return { type: "array", items: this.type(text.slice(0, -2), scope) };
    const generic = /^(?:Array|ReadonlyArray)<([\s\S]+)>$/.exec(text);
    if (generic) return { type: "array", items: this.type(generic[1], scope) };
    if (/^Record</.test(text)) return { type: "object" };
    const name = this.resolve(text, scope);
    if (name) return this.ref(name);
    this.unresolved.add(text);
    return {};
  }
}

export function anthropicValidator() {
  const sdk = modules("@anthropic-ai/sdk");
  const schemas = new DtsSchemas([path.join(sdk, "resources/messages/messages.d.ts"), path.join(sdk, "resources/shared.d.ts")]);
  const ajv = newAjv();
  const cache = new Map();
  const version = JSON.parse(fs.readFileSync(path.join(sdk, "package.json"), "utf8")).version;
  return {
    version,
    // Validates `data` as the SDK's type `name` (e.g. "Message", "RawMessageStreamEvent", "ErrorResponse").
    check(name, data) {
      if (!cache.has(name)) {
        const root = schemas.ref(name);
        cache.set(name, ajv.compile({ ...root, $defs: { ...schemas.defs } }));
      }
      const v = cache.get(name);
      assert.ok(v(data), failure(`@anthropic-ai/sdk ${version} ${name}`, data, v.errors));
    },
    // The SDK's required (non-optional) properties of an interface, as read.
    required(name) {
      schemas.ref(name);
      return schemas.defs[name].required ?? [];
    },
  };
}

// A text/event-stream body: each event's name (null without an `event:` line) and its data
// (parsed JSON, or the text itself, e.g. "[DONE]").
export function sseEvents(text) {
  const out = [];
  for (const block of text.split(/\n\n/)) {
    if (!block.trim()) continue;
    let event = null;
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) event = line.slice(7);
      else if (line.startsWith("data: ")) data.push(line.slice(6));
    }
    const joined = data.join("\n");
    let parsed = joined;
    try {
      parsed = JSON.parse(joined);
    } catch {}
    out.push({ event, data: parsed });
  }
  return out;
}
