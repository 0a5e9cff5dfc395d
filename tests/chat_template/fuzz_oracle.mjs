// Differential test input: random (seeded, reproducible) templates rendered by @huggingface/jinja.
//
//   node fuzz_oracle.mjs <node_dir> <seed> <count>
//
// Prints { "cases": [ { "name", "template", "context", "now", "ok", "output" | "error", "raised" } ] }.
// Two generators: "typed" builds mostly well-typed expressions and statements (so most cases render and
// exercise values, filters, methods and loops); "ws" mixes whitespace, text and tags with random `-`
// markers (to exercise trim_blocks/lstrip_blocks and whitespace control).
import { createRequire } from "node:module";
import path from "node:path";

const [nodeDir, seedArg, countArg] = process.argv.slice(2);
if (!nodeDir || seedArg === undefined || countArg === undefined) {
  console.error("usage: node fuzz_oracle.mjs <node_dir> <seed> <count>");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(nodeDir), "package.json"));
const { Template, Environment } = require("@huggingface/jinja");

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
const RealDate = Date;
const NOW = 1721995200;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(NOW * 1000);
    else super(...args);
  }
  static now() {
    return NOW * 1000;
  }
};

// mulberry32
let state = Number(seedArg) >>> 0;
function rand() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (...xs) => xs[Math.floor(rand() * xs.length)];
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

const STRL = ["''", "'a'", "'Hello World'", "' pad '", "'\\n x \\n'", "'é😀'", "'ß'", "'a,b,,c'", "'<think>x</think>y'",
  "'1'", "'2.5'", "'ABC'", "'x\\ty'", "'{\"j\": 1}'", "'  '", "'ΣΑΣ'", "'é'", "'The end.'"];
const q = (s) => `'${s}'`;
function S(d) {
  if (d <= 0) return pick(...STRL, "s", "t", "msgs[1].content", "d.a", "msgs[0]['role']", "nested.k.j[1].m", "u");
  const r = rand();
  if (r < 0.15) return S(0);
  if (r < 0.25) return `${S(d - 1)} ~ ${A(d - 1)}`;
  if (r < 0.32) return `${S(d - 1)} + ${S(d - 1)}`;
  if (r < 0.45) return `${S(d - 1)}|` + pick("upper", "lower", "trim", "title", "capitalize", "indent", "string", "safe",
    "replace('a', 'Z')", "replace(' ', '')", "indent(2, true)", "join('.')");
  if (r < 0.6) return `${S(d - 1)}.` + pick("strip()", "lstrip()", "rstrip('x')", "upper()", "lower()", "title()",
    "capitalize()", "replace('e', '3')", "replace('', '_', 2)");
  if (r < 0.65) return `${N(d - 1)}|string`;
  if (r < 0.72) return `${L(d - 1)}|join(${pick(q(", "), q(""), q("|"))})`;
  if (r < 0.8) return `${A(d - 1)}|tojson` + pick("", "(indent=2)", "(sort_keys=true)", "(ensure_ascii=true)", "(separators=(',', ':'))");
  if (r < 0.85) return `${S(d - 1)}[${pick("1:", ":3", "::-1", "-2:", "1:-1", "::2")}]`;
  if (r < 0.9) return `(${S(d - 1)} if ${B(d - 1)} else ${S(d - 1)})`;
  if (r < 0.95) return `${S(d - 1)}.split(${pick("", q(","), q(" "), "none, 1")})[${pick("0", "-1")}]`;
  return `${D(d - 1)}.get(${pick(q("a"), q("zz"))}, 'dflt')|string`;
}
function N(d) {
  if (d <= 0) return pick("0", "1", "2", "7", "-3", "1.5", "2.0", "0.1", "n", "f", "z", "100", "-0.0", "1000", "0.25", "3.75");
  const r = rand();
  if (r < 0.2) return N(0);
  if (r < 0.5) return `(${N(d - 1)} ${pick("+", "-", "*", "/", "//", "%", "**")} ${N(d - 1)})`;
  if (r < 0.6) return `${pick(S(d - 1), L(d - 1), D(d - 1))}|length`;
  if (r < 0.7) return `${pick(S(d - 1), N(d - 1), q("42"), q(" 3.5x"))}|` + pick("int", "float", "int(5)", "float(5)");
  if (r < 0.8) return `${N(d - 1)}|abs`;
  if (r < 0.9) return `-${N(d - 1)}`;
  return `${L(d - 1)}|length`;
}
function L(d) {
  if (d <= 0) return pick("l", "msgs", "e", "range(4)", "[1, 2, 3]", "['b', 'a', 'C']", "[]", "ws", "nums", "mixed");
  const r = rand();
  if (r < 0.15) return L(0);
  if (r < 0.3) return `${L(d - 1)}|` + pick("sort", "reverse", "unique", "list", "sort(reverse=true)", "sort(case_sensitive=true)");
  if (r < 0.4) return `${S(d - 1)}.split(${pick("", q(","), q(" "))})`;
  if (r < 0.5) return `(${L(d - 1)} + ${L(d - 1)})`;
  if (r < 0.6) return `${L(d - 1)}[${pick("1:", ":2", "::-1", "-2:", "::2", "5:", "3:0:-1")}]`;
  if (r < 0.7) return `${D(d - 1)}.` + pick("items()", "keys()", "values()");
  if (r < 0.78) return "msgs|" + pick("map(attribute='role')", "map(attribute='content')", "selectattr('role', 'equalto', 'user')",
    "rejectattr('role', 'equalto', 'user')", "selectattr('tool_calls')", "map(attribute='zz', default='-')", "sort(attribute='role')");
  if (r < 0.86) return `${D(d - 1)}|` + pick("items", "dictsort", "dictsort(reverse=true)");
  if (r < 0.93) return "[" + Array.from({ length: int(0, 3) }, () => A(d - 1)).join(", ") + "]";
  return `range(${pick("3", "1, 5", "0, 10, 3", "5, 0, -1")})`;
}
function D(d) {
  if (d <= 0) return pick("d", "nested", "nested.k", "msgs[2]", "msgs[2].tool_calls[0].function", "{}", "{'x': 1, 'y': [2]}");
  if (rand() < 0.5) return D(0);
  return "{" + Array.from({ length: int(0, 3) }, () => `${S(0)}: ${A(d - 1)}`).join(", ") + "}";
}
function B(d) {
  if (d <= 0) return pick("true", "false", "b", "n > 3", "s", "e", "l", "nul", "undef");
  const r = rand();
  if (r < 0.25) return `${N(d - 1)} ${pick("<", ">", "<=", ">=", "==", "!=")} ${N(d - 1)}`;
  if (r < 0.35) return `${A(d - 1)} ${pick("==", "!=")} ${A(d - 1)}`;
  if (r < 0.45) return `${S(d - 1)} ${pick("in", "not in")} ${pick(S(d - 1), L(d - 1), D(d - 1))}`;
  if (r < 0.6) return `${A(d - 1)} is ${pick("", "not ")}` + pick("defined", "undefined", "none", "string", "number", "integer",
    "mapping", "iterable", "sequence", "boolean", "true", "false", "lower", "upper", "callable");
  if (r < 0.7) return `${N(d - 1)}|int is ${pick("odd", "even")}`;
  if (r < 0.8) return `${B(d - 1)} ${pick("and", "or")} ${B(d - 1)}`;
  if (r < 0.9) return `not ${B(d - 1)}`;
  return `${S(d - 1)}.${pick("startswith", "endswith")}(${pick(S(0), "(" + S(0) + ", " + S(0) + ")")})`;
}
function A(d) {
  return pick(S, N, L, D, B)(d);
}
function stmt(d) {
  const r = rand();
  if (d <= 0 || r < 0.3) return "{{ " + A(2) + " }}";
  if (r < 0.45) {
    return "{% for x in " + L(1) + (rand() < 0.2 ? " if " + B(0) : "") + " %}[{{ x }}|{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.revindex }}]" +
      body(d - 1) + (rand() < 0.2 ? "{% if loop.index > 2 %}{% " + pick("break", "continue") + " %}{% endif %}" : "") +
      (rand() < 0.3 ? "{% else %}E" : "") + "{% endfor %}";
  }
  if (r < 0.6) {
    return "{% if " + B(2) + " %}" + body(d - 1) + (rand() < 0.3 ? "{% elif " + B(1) + " %}" + body(d - 1) : "") +
      (rand() < 0.5 ? "{% else %}" + body(d - 1) : "") + "{% endif %}";
  }
  if (r < 0.7) return "{% set v = " + A(2) + " %}{{ v }}";
  if (r < 0.75) return "{% set ns = namespace(a=" + A(1) + ") %}{% for i in range(2) %}{% set ns.a = " + A(1) + " %}{% endfor %}{{ ns.a }}{{ ns|tojson }}";
  if (r < 0.8) return "{% macro m(a, b=" + A(1) + ") %}<{{ a }}|{{ b }}>{% endmacro %}{{ m(" + A(1) + ") }}{{ m(" + A(1) + ", b=" + A(0) + ") }}";
  if (r < 0.85) return "{%- if " + B(1) + " -%}\n  " + body(d - 1) + "  \n{%- else %}\n  no\n{% endif %}\n";
  if (r < 0.88) return "{% set " + pick("a, b = [1, 2]", "a, b = ('x', 'y')", "a = 1") + " %}{{ a }}{{ b }}";
  if (r < 0.91) {
    return "{% macro w(x) %}[{{ caller() }}|{{ x }}|{{ varargs }}|{{ kwargs }}]{% endmacro %}{% call w(" + A(1) +
      pick("", ", 1, 2", ", k=" + A(0)) + ") %}" + body(d - 1) + "{% endcall %}";
  }
  if (r < 0.94) return "{% filter " + pick("upper", "lower", "trim", "replace('a', 'b')", "indent(2)") + " %}" + body(d - 1) + "{% endfilter %}";
  if (r < 0.97) return "{% for x in " + L(0) + " %}{{ loop.previtem }}/{{ loop.nextitem }}/{{ loop.revindex0 }}{{ loop.length }};{% endfor %}";
  return "{# c #}" + body(d - 1);
}
function body(d) {
  let out = "";
  for (let i = int(1, 3); i > 0; --i) out += pick("", " ", "\n", "  \n  ", "\t", "\n    ") + stmt(d);
  return out;
}

const TXT = [" ", "  ", "\t", "\n", "\n\n", "\r\n", "\r", "x", "ab", " y ", "\u00a0", "\u3000", "\u2028", "\u2029", "\ufeff", "é",
  "-}", "%}", "#}", "{", "}", "-", "{-", "\n  ", "\n\t", "  \n"];
const text = () => Array.from({ length: int(0, 4) }, () => pick(...TXT)).join("");
function tag() {
  const l = pick("", "-"), r = pick("", "-"), k = rand(), inner = pick("", " ", "  ", "\n", "\t");
  if (k < 0.25) return "{{" + l + inner + pick("'v'", "1", "x", "none", "' s '") + inner + r + "}}";
  if (k < 0.4) return "{#" + l + pick(" c ", "", "x\ny", " - ") + r + "#}";
  if (k < 0.55) return "{%" + l + inner + "if true" + inner + r + "%}" + text() + "{%" + pick("", "-") + " endif " + pick("", "-") + "%}";
  if (k < 0.7) {
    return "{%" + l + inner + "for i in [1, 2]" + inner + r + "%}" + text() + "{{ i }}" + text() + "{%" + pick("", "-") +
      " endfor " + pick("", "-") + "%}";
  }
  if (k < 0.8) return "{%" + l + inner + "set v = 3" + inner + r + "%}";
  if (k < 0.9) return "{%" + l + " " + pick("generation", "endgeneration") + " " + r + "%}";
  return "{%" + l + " set w %}" + text() + "{% endset " + r + "%}{{ w }}";
}
function wsTemplate() {
  let t = "";
  for (let i = int(1, 6); i > 0; --i) t += text() + tag();
  return t + text();
}

const CONTEXT = {
  s: "  Some Text\n", t: "a😀b", u: "İstanbul ǅ ﬁ", n: 5, f: 2.5, z: 0, l: [3, 1, 2], e: [], b: true, nul: null,
  d: { b: 1, a: "x", c: [1, 2] }, ws: ["  x ", "y\n", ""], nums: [1.5, -2, 0, 10, 3.25], mixed: ["b", "A", "a", "10", "9"],
  msgs: [{ role: "system", content: "sys" }, { role: "user", content: "hi there" },
    { role: "assistant", content: "<think>r</think>ok", tool_calls: [{ function: { name: "f", arguments: { x: 1, y: "é" } } }] },
    { role: "tool", content: "res" }],
  nested: { k: { j: [1, { m: "deep" }] }, 2: "two", 1: "one" },
  x: "X",
};

const count = Number(countArg);
const cases = [];
for (let i = 0; i < count; ++i) {
  const template = i % 3 === 2 ? wsTemplate() : body(2);
  let result;
  try {
    result = { ok: true, output: new Template(template).render(CONTEXT) };
  } catch (e) {
    result = { ok: false, raised: Boolean(e && e.memraRaised), error: String(e && e.message !== undefined ? e.message : e) };
  }
  // JSON cannot carry lone surrogates to the C++ side; such cases are skipped.
  if (result.ok && /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(result.output)) continue;
  cases.push({ name: `fuzz_${seedArg}_${i}`, template, context: CONTEXT, now: NOW, ...result });
}
process.stdout.write(JSON.stringify({ cases }));
