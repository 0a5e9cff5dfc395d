#include "host/server/tool_call_parser.hpp"

#include <nlohmann/json.hpp>

#include "host/json/bounded_parse.hpp"

namespace memra::server {
namespace {

using ojson = nlohmann::ordered_json;

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

// Model output parsed under the limits of client JSON (a model can be asked to nest);
// a discarded value when it is not JSON or passes a limit.
ojson parse_or_discarded(std::string_view text) {
  auto v = jsonio::parse(text);
  return v ? std::move(*v) : ojson(ojson::value_t::discarded);
}

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::size_t partial_suffix(std::string_view text, std::string_view marker) {
  for (std::size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

const ToolDef* find_tool(const std::vector<ToolDef>* tools, const std::string& name) {
  if (tools == nullptr) return nullptr;
  for (const auto& t : *tools)
    if (t.name == name) return &t;
  return nullptr;
}

// {"name": ..., "arguments"|"parameters": {...}} -> a call (arguments re-serialised compactly).
bool call_from_json(const ojson& j, ParsedToolCall& out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const ojson* args = nullptr;
  for (const char* key : {"arguments", "parameters"})
    if (auto it = j.find(key); it != j.end()) args = &*it;
  ojson a = args ? *args : ojson::object();
  if (a.is_string()) {  // some models write the arguments as a JSON string
    ojson inner = parse_or_discarded(a.get<std::string>());
    if (inner.is_discarded()) return false;
    a = std::move(inner);
  }
  if (!a.is_object()) return false;
  out.name = j["name"].get<std::string>();
  out.arguments = dump(a);
  return true;
}

std::vector<ParsedToolCall> parse_json_calls(std::string_view body) {
  std::vector<ParsedToolCall> calls;
  body = trim(body);
  if (body.empty()) return {};
  // One object, an array of them, or objects separated by ';' / newlines (Llama 3).
  ojson whole = parse_or_discarded(body);
  if (!whole.is_discarded()) {
    if (whole.is_array()) {
      for (const auto& j : whole) {
        ParsedToolCall c;
        if (!call_from_json(j, c)) return {};
        calls.push_back(std::move(c));
      }
      return calls;
    }
    ParsedToolCall c;
    if (!call_from_json(whole, c)) return {};
    return {c};
  }
  std::size_t p = 0;
  while (p < body.size()) {
    std::size_t q = body.find(';', p);
    if (q == std::string_view::npos) q = body.size();
    const std::string_view piece = trim(body.substr(p, q - p));
    p = q + 1;
    if (piece.empty()) continue;
    ojson j = parse_or_discarded(piece);
    ParsedToolCall c;
    if (j.is_discarded() || !call_from_json(j, c)) return {};
    calls.push_back(std::move(c));
  }
  return calls;
}

// A parameter's text as the JSON value its schema wants (strings stay strings).
ojson typed_value(const ToolDef* tool, const std::string& name, const std::string& text) {
  std::string type;
  if (tool != nullptr) {
    const auto& props = tool->parameters.value("properties", ojson::object());
    if (props.contains(name) && props[name].is_object() && props[name].contains("type") && props[name]["type"].is_string())
      type = props[name]["type"].get<std::string>();
  }
  if (type == "string") return text;
  ojson v = parse_or_discarded(trim(text));
  if (!v.is_discarded()) return v;
  return text;
}

std::vector<ParsedToolCall> parse_coder_calls(std::string_view body, const std::vector<ToolDef>* tools) {
  std::vector<ParsedToolCall> calls;
  std::size_t p = 0;
  while (true) {
    const std::size_t f = body.find("<function=", p);
    if (f == std::string_view::npos) break;
    const std::size_t name_end = body.find('>', f);
    const std::size_t fend = body.find("</function>", f);
    if (name_end == std::string_view::npos || fend == std::string_view::npos || name_end > fend) return {};
    ParsedToolCall c;
    c.name = std::string(trim(body.substr(f + 10, name_end - f - 10)));
    const ToolDef* tool = find_tool(tools, c.name);
    ojson args = ojson::object();
    std::size_t q = name_end + 1;
    while (true) {
      const std::size_t pa = body.find("<parameter=", q);
      if (pa == std::string_view::npos || pa > fend) break;
      const std::size_t pn = body.find('>', pa);
      const std::size_t pe = body.find("</parameter>", pa);
      if (pn == std::string_view::npos || pe == std::string_view::npos || pe > fend) return {};
      const std::string key(trim(body.substr(pa + 11, pn - pa - 11)));
      std::string value(body.substr(pn + 1, pe - pn - 1));
      if (!value.empty() && value.front() == '\n') value.erase(0, 1);
      if (!value.empty() && value.back() == '\n') value.pop_back();
      args[key] = typed_value(tool, key, value);
      q = pe + 12;
    }
    c.arguments = dump(args);
    calls.push_back(std::move(c));
    p = fend + 11;
  }
  return calls;
}

// A small reader of Python literals for pythonic calls: name(k=v, ...).
struct PyReader {
  std::string_view s;
  std::size_t i = 0;
  bool ok = true;
  std::size_t depth = 0;
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  std::string ident() {
    ws();
    const std::size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' || s[i] == '.' || s[i] == '-')) ++i;
    return std::string(s.substr(b, i - b));
  }
  ojson value() {
    ws();
    if (i >= s.size()) return fail();
    const char c = s[i];
    if (c == '"' || c == '\'') {
      ++i;
      std::string out;
      while (i < s.size() && s[i] != c) {
        if (s[i] == '\\' && i + 1 < s.size()) {
          const char e = s[++i];
          out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        } else {
          out += s[i];
        }
        ++i;
      }
      if (i >= s.size()) return fail();
      ++i;
      return out;
    }
    // Containers nest no deeper than client JSON may (the parse recurses per level).
    if ((c == '[' || c == '(' || c == '{') && ++depth > jsonio::kRequestLimits.max_depth) return fail();
    if (c == '[' || c == '(') {
      const char close = c == '[' ? ']' : ')';
      ++i;
      ojson arr = ojson::array();
      if (eat(close)) return arr;
      do arr.push_back(value());
      while (ok && eat(',') && arr.size() < jsonio::kRequestLimits.max_array_items);
      if (!eat(close)) return fail();
      --depth;
      return arr;
    }
    if (c == '{') {
      ++i;
      ojson obj = ojson::object();
      if (eat('}')) return obj;
      do {
        ojson k = value();
        if (!ok || !k.is_string() || !eat(':')) return fail();
        obj[k.get<std::string>()] = value();
      } while (ok && eat(',') && obj.size() < jsonio::kRequestLimits.max_object_keys);
      if (!eat('}')) return fail();
      --depth;
      return obj;
    }
    const std::string word = ident();
    if (word == "True" || word == "true") return true;
    if (word == "False" || word == "false") return false;
    if (word == "None" || word == "null") return nullptr;
    ojson n = parse_or_discarded(word);
    if (n.is_discarded() || !n.is_number()) return fail();
    return n;
  }
  ojson fail() {
    ok = false;
    return nullptr;
  }
};

std::vector<ParsedToolCall> parse_pythonic_calls(std::string_view body) {
  body = trim(body);
  if (body.substr(0, 3) == "```") {
    const std::size_t nl = body.find('\n');
    const std::size_t end = body.rfind("```");
    if (nl == std::string_view::npos || end == std::string_view::npos || end <= nl) return {};
    body = trim(body.substr(nl + 1, end - nl - 1));
  }
  const bool list = !body.empty() && body.front() == '[';
  PyReader r{body};
  if (list) r.eat('[');
  std::vector<ParsedToolCall> calls;
  do {
    ParsedToolCall c;
    c.name = r.ident();
    if (c.name.empty() || !r.eat('(')) return {};
    ojson args = ojson::object();
    if (!r.eat(')')) {
      do {
        const std::string key = r.ident();
        if (key.empty() || !r.eat('=')) return {};
        args[key] = r.value();
        if (!r.ok) return {};
      } while (r.eat(','));
      if (!r.eat(')')) return {};
    }
    c.arguments = dump(args);
    calls.push_back(std::move(c));
  } while (r.eat(','));
  if (list && !r.eat(']')) return {};
  r.ws();
  if (r.i != body.size()) return {};
  return calls;
}

struct Markers {
  std::string_view open, close;
};
Markers markers(ToolFormat f) {
  switch (f) {
    case ToolFormat::hermes:
    case ToolFormat::qwen3_coder: return {"<tool_call>", "</tool_call>"};
    case ToolFormat::pythonic: return {"```tool_code", "```"};
    default: return {};
  }
}

}  // namespace

ToolFormat tool_format_for_template(std::string_view src) {
  if (src.find("<function=") != std::string_view::npos && src.find("<parameter=") != std::string_view::npos)
    return ToolFormat::qwen3_coder;
  if (src.find("<tool_call>") != std::string_view::npos) return ToolFormat::hermes;
  if (src.find("tool_code") != std::string_view::npos) return ToolFormat::pythonic;
  if (src.find("<|python_tag|>") != std::string_view::npos || src.find("ipython") != std::string_view::npos ||
      (src.find("tools") != std::string_view::npos && src.find("\"parameters\"") != std::string_view::npos))
    return ToolFormat::llama3_json;
  if (src.find("tools") != std::string_view::npos) return ToolFormat::hermes;  // the common default
  return ToolFormat::none;
}

const char* to_string(ToolFormat f) {
  switch (f) {
    case ToolFormat::hermes: return "hermes";
    case ToolFormat::qwen3_coder: return "qwen3_coder";
    case ToolFormat::llama3_json: return "llama3_json";
    case ToolFormat::pythonic: return "pythonic";
    default: return "none";
  }
}

std::vector<ParsedToolCall> parse_tool_calls(ToolFormat format, std::string_view body, const std::vector<ToolDef>* tools) {
  switch (format) {
    case ToolFormat::hermes:
    case ToolFormat::llama3_json: return parse_json_calls(body);
    case ToolFormat::qwen3_coder: return parse_coder_calls(body, tools);
    case ToolFormat::pythonic: return parse_pythonic_calls(body);
    default: return {};
  }
}

ToolCallParser::ToolCallParser(ToolFormat format, const std::vector<ToolDef>* tools) : format_(format), tools_(tools) {}

ToolCallParser::Out ToolCallParser::push(std::string_view text) {
  held_.append(text);
  return scan(false);
}

ToolCallParser::Out ToolCallParser::finish() { return scan(true); }

ToolCallParser::Out ToolCallParser::scan(bool at_end) {
  Out out;
  if (format_ == ToolFormat::none) {
    out.content = std::move(held_);
    held_.clear();
    return out;
  }
  if (format_ == ToolFormat::llama3_json || (format_ == ToolFormat::pythonic && !whole_answer_ && !started_)) {
    // An answer that begins with '{' or '[' may be calls as a whole: decided at the end.
    if (!started_) {
      const auto b = held_.find_first_not_of(" \t\r\n");
      if (b == std::string::npos) return out;
      started_ = true;
      whole_answer_ = held_[b] == '{' || (format_ == ToolFormat::pythonic && held_[b] == '[');
    }
  }
  if (whole_answer_) {
    if (!at_end) return out;
    auto calls = parse_tool_calls(format_, held_, tools_);
    if (calls.empty()) out.content = std::move(held_);
    else out.calls = std::move(calls);
    held_.clear();
    return out;
  }
  if (format_ == ToolFormat::llama3_json) {
    out.content = std::move(held_);
    held_.clear();
    return out;
  }
  const Markers m = markers(format_);
  while (true) {
    if (after_call_) {  // whitespace between or after calls is not content
      const auto b = held_.find_first_not_of(" \t\r\n");
      if (b == std::string::npos) {
        held_.clear();
        return out;
      }
      held_.erase(0, b);
      after_call_ = false;
    }
    const std::size_t open = held_.find(m.open);
    if (open == std::string::npos) {
      const std::size_t keep = at_end ? 0 : partial_suffix(held_, m.open);
      out.content += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    out.content += held_.substr(0, open);
    held_.erase(0, open);
    const std::size_t close = held_.find(m.close, m.open.size());
    if (close == std::string::npos && !at_end) return out;  // the call is still being written
    const std::size_t end = close == std::string::npos ? held_.size() : close + m.close.size();
    const std::string_view body = std::string_view(held_).substr(m.open.size(), (close == std::string::npos ? held_.size() : close) - m.open.size());
    auto calls = parse_tool_calls(format_, format_ == ToolFormat::pythonic ? "```\n" + std::string(body) + "\n```" : std::string(body), tools_);
    if (calls.empty()) {
      out.content += held_.substr(0, end);
    } else {
      out.calls.insert(out.calls.end(), calls.begin(), calls.end());
      after_call_ = true;
    }
    held_.erase(0, end);
  }
}

}  // namespace memra::server
