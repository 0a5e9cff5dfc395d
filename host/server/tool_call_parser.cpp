#include "host/server/tool_call_parser.hpp"

#include <nlohmann/json.hpp>
#include <optional>

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

CallFrame forced_call_frame(ToolFormat format, const std::string& name) {
  const std::string quoted = ojson(name).dump();
  switch (format) {
    case ToolFormat::qwen3_coder: return {"<tool_call>\n<function=" + name + ">\n", "</function>\n</tool_call>"};
    case ToolFormat::llama3_json: return {"{\"name\": " + quoted + ", \"parameters\": ", "}"};
    default: return {"<tool_call>\n{\"name\": " + quoted + ", \"arguments\": ", "}\n</tool_call>"};
  }
}

bool coder_plain_string(const ojson& sub) {
  return sub.is_object() && sub.value("type", ojson()) == "string" && !sub.contains("enum") && !sub.contains("const") &&
         !sub.contains("minLength") && !sub.contains("maxLength") && !sub.contains("format") &&
         !sub.contains("pattern");
}

ToolCallParser::ToolCallParser(ToolFormat format, const std::vector<ToolDef>* tools, bool forced)
    : format_(format), tools_(tools) {
  const bool streams = format == ToolFormat::hermes || format == ToolFormat::llama3_json || format == ToolFormat::qwen3_coder;
  if (!forced || !streams || tools == nullptr) stage_ = Stage::off;
}

ToolCallParser::Out ToolCallParser::push(std::string_view text) {
  held_.append(text);
  return stage_ == Stage::off ? scan(false) : stream(false);
}

ToolCallParser::Out ToolCallParser::finish() { return stage_ == Stage::off ? scan(true) : stream(true); }

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void drop_leading_space(std::string& s) { s.erase(0, std::min(s.size(), s.find_first_not_of(" \t\r\n"))); }

// Text as the inside of a JSON string (what nlohmann's dump writes for valid UTF-8).
std::string json_escape(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          static const char* kHex = "0123456789abcdef";
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

// The pieces of the call being written, joined where they follow each other in one Out.
void begin_call(ToolCallParser::Out& out, const std::string& name) { out.calls.push_back({true, name, "", false, false}); }
void add_arguments(ToolCallParser::Out& out, const std::string& text) {
  if (text.empty()) return;
  if (out.calls.empty() || out.calls.back().ends) out.calls.push_back({false, "", "", false, false});
  out.calls.back().arguments += text;
}
void end_call(ToolCallParser::Out& out, bool cut) {
  if (out.calls.empty() || out.calls.back().ends) out.calls.push_back({false, "", "", false, false});
  out.calls.back().ends = true;
  out.calls.back().cut = cut;
}

}  // namespace

ToolCallParser::Out ToolCallParser::stream(bool at_end) {
  Out out;
  // Feeds `held_` to the JSON value being written, its text without whitespace between
  // tokens to `to`; true once the value ended (a scalar's delimiter is left in held_).
  auto scan_json = [&](std::string& to) {
    JsonScan& s = json_;
    std::size_t i = 0;
    for (; i < held_.size() && !s.done; ++i) {
      const char c = held_[i];
      if (s.in_string) {
        to += c;
        if (s.escape) s.escape = false;
        else if (c == '\\') s.escape = true;
        else if (c == '"') {
          s.in_string = false;
          s.done = s.depth == 0;
        }
        continue;
      }
      if (s.scalar) {
        if (is_space(c) || c == ',' || c == '}' || c == ']') {
          s.done = true;
          break;
        }
        to += c;
        continue;
      }
      if (is_space(c)) continue;
      to += c;
      if (c == '"') s.in_string = true;
      else if (c == '{' || c == '[') ++s.depth;
      else if (c == '}' || c == ']') s.done = --s.depth == 0;
      else if (s.depth == 0) s.scalar = true;
    }
    held_.erase(0, i);
    return s.done;
  };
  // Whether `held_` starts with `text` (true), may still (nullopt), or cannot (false).
  auto starts = [&](std::string_view text) -> std::optional<bool> {
    if (held_.size() >= text.size()) return held_.compare(0, text.size(), text) == 0;
    if (text.compare(0, held_.size(), held_) == 0) return std::nullopt;
    return false;
  };
  while (true) {
    switch (stage_) {
      case Stage::off: {
        Out rest = scan(at_end);
        out.content += rest.content;
        out.calls.insert(out.calls.end(), rest.calls.begin(), rest.calls.end());
        return out;
      }
      case Stage::between: {  // whitespace (and llama3's ';') between calls is not content
        const auto b = held_.find_first_not_of(format_ == ToolFormat::llama3_json ? " \t\r\n;" : " \t\r\n");
        held_.erase(0, std::min(b, held_.size()));
        if (held_.empty()) return out;
        stage_ = Stage::head;
        break;
      }
      case Stage::head: {
        bool maybe = false;
        for (const auto& t : *tools_) {
          const CallFrame frame = forced_call_frame(format_, t.name);
          const auto s = starts(frame.head);
          if (s == true) {
            begin_call(out, t.name);
            held_.erase(0, frame.head.size());
            tool_ = &t;
            tail_ = frame.tail;
            json_ = {};
            first_param_ = true;
            stage_ = format_ == ToolFormat::qwen3_coder ? Stage::params : Stage::args;
            break;
          }
          maybe = maybe || !s.has_value();
        }
        if (stage_ != Stage::head) break;
        if (!maybe) {  // not a call of this frame (the grammar never writes this): as before
          stage_ = Stage::off;
          break;
        }
        if (at_end) held_.clear();  // a call cut before its name is complete: dropped, never content
        return out;
      }
      case Stage::args: {
        std::string text;
        const bool done = scan_json(text);
        add_arguments(out, text);
        if (!done) {
          if (at_end) {
            end_call(out, true);
            held_.clear();
          }
          return out;
        }
        stage_ = Stage::tail;
        break;
      }
      case Stage::tail: {
        drop_leading_space(held_);
        const auto s = starts(tail_);
        if (s == true) held_.erase(0, tail_.size());
        else if (!s.has_value() && !at_end) return out;
        end_call(out, false);
        stage_ = s == false ? Stage::off : Stage::between;
        if (at_end && s != false) held_.clear();
        break;
      }
      case Stage::params: {  // qwen3_coder: the next <parameter=K>, or the end of the function
        const ojson props = tool_->parameters.value("properties", ojson::object());
        bool maybe = false;
        for (const auto& [key, sub] : props.items()) {
          const std::string open = std::string(kCoderParameterOpen) + key + ">\n";
          const auto s = starts(open);
          if (s == true) {
            held_.erase(0, open.size());
            plain_value_ = coder_plain_string(sub);
            add_arguments(out, (first_param_ ? "{" : ",") + ojson(key).dump() + ":" + (plain_value_ ? "\"" : ""));
            first_param_ = false;
            json_ = {};
            stage_ = Stage::value;
            break;
          }
          maybe = maybe || !s.has_value();
        }
        if (stage_ != Stage::params) break;
        const auto s = starts(tail_);
        if (s == true) {
          held_.erase(0, tail_.size());
          add_arguments(out, first_param_ ? "{}" : "}");
          end_call(out, false);
          stage_ = Stage::between;
          break;
        }
        if (at_end || (!maybe && s == false)) {  // cut, or not this frame
          end_call(out, true);
          if (at_end) {
            held_.clear();
            return out;
          }
          stage_ = Stage::off;
          break;
        }
        return out;
      }
      case Stage::value: {
        if (plain_value_) {  // text without '<' up to the closing tag
          const std::size_t close = held_.find(kCoderParameterClose);
          const std::size_t keep = close != std::string::npos ? 0 : partial_suffix(held_, kCoderParameterClose);
          const std::size_t text = close != std::string::npos ? close : held_.size() - keep;
          add_arguments(out, json_escape(std::string_view(held_).substr(0, text)) + (close != std::string::npos ? "\"" : ""));
          if (close != std::string::npos) {
            held_.erase(0, close + kCoderParameterClose.size());
            stage_ = Stage::params;
            break;
          }
          held_.erase(0, text);
        } else {
          std::string text;
          const bool done = scan_json(text);
          add_arguments(out, text);
          if (done) {
            stage_ = Stage::value_close;
            break;
          }
        }
        if (at_end) {
          end_call(out, true);
          held_.clear();
        }
        return out;
      }
      case Stage::value_close: {
        drop_leading_space(held_);
        const auto s = starts(kCoderParameterClose.substr(1));
        if (s == true) {
          held_.erase(0, kCoderParameterClose.size() - 1);
          stage_ = Stage::params;
          break;
        }
        if (s == false || at_end) {  // cut, or not this frame
          end_call(out, true);
          if (at_end) {
            held_.clear();
            return out;
          }
          stage_ = Stage::off;
          break;
        }
        return out;
      }
    }
  }
}

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
    for (auto& c : calls) out.calls.push_back({true, std::move(c.name), std::move(c.arguments), true, false});
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
      for (auto& c : calls) out.calls.push_back({true, std::move(c.name), std::move(c.arguments), true, false});
      after_call_ = true;
    }
    held_.erase(0, end);
  }
}

}  // namespace memra::server
