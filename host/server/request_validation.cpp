#include "host/server/request_validation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "host/server/body_checker.hpp"

namespace memra::server {
namespace {

using json = nlohmann::ordered_json;

using Policy = FieldPolicy;

const std::map<std::string, Policy, std::less<>>& chat_fields() {
  static const std::map<std::string, Policy, std::less<>> k = {
      {"model", Policy::honoured},          {"messages", Policy::honoured},
      {"stream", Policy::honoured},         {"stream_options", Policy::honoured},
      {"max_tokens", Policy::honoured},     {"max_completion_tokens", Policy::honoured},
      {"stop", Policy::honoured},           {"temperature", Policy::honoured},
      {"top_p", Policy::honoured},          {"top_k", Policy::honoured},
      {"min_p", Policy::honoured},          {"presence_penalty", Policy::honoured},
      {"frequency_penalty", Policy::honoured}, {"repetition_penalty", Policy::honoured},
      {"seed", Policy::honoured},           {"n", Policy::honoured},
      {"logprobs", Policy::honoured},       {"top_logprobs", Policy::honoured},
      {"user", Policy::honoured},           {"cache_salt", Policy::honoured},
      {"ignore_eos", Policy::honoured},
      {"metadata", Policy::harmless},       {"store", Policy::harmless},
      {"service_tier", Policy::harmless},   {"parallel_tool_calls", Policy::honoured},
      {"prompt_cache_key", Policy::harmless}, {"safety_identifier", Policy::harmless},
      {"tools", Policy::honoured},          {"tool_choice", Policy::honoured},
      {"functions", Policy::default_only},  {"function_call", Policy::default_only},
      {"response_format", Policy::honoured}, {"logit_bias", Policy::honoured},
      {"chat_template_kwargs", Policy::honoured},
      {"modalities", Policy::default_only}, {"audio", Policy::default_only},
      {"prediction", Policy::default_only}, {"reasoning_effort", Policy::honoured},
      {"thinking_token_budget", Policy::honoured},
      {"web_search_options", Policy::default_only}, {"verbosity", Policy::default_only},
  };
  return k;
}

const std::map<std::string, Policy, std::less<>>& text_fields() {
  static const std::map<std::string, Policy, std::less<>> k = {
      {"model", Policy::honoured},          {"prompt", Policy::honoured},
      {"stream", Policy::honoured},         {"stream_options", Policy::honoured},
      {"max_tokens", Policy::honoured},     {"stop", Policy::honoured},
      {"temperature", Policy::honoured},    {"top_p", Policy::honoured},
      {"top_k", Policy::honoured},          {"min_p", Policy::honoured},
      {"presence_penalty", Policy::honoured}, {"frequency_penalty", Policy::honoured},
      {"repetition_penalty", Policy::honoured}, {"seed", Policy::honoured},
      {"n", Policy::honoured},              {"logprobs", Policy::honoured},
      {"echo", Policy::honoured},           {"user", Policy::honoured},
      {"cache_salt", Policy::honoured},     {"ignore_eos", Policy::honoured},
      {"best_of", Policy::honoured},        {"metadata", Policy::harmless},
      {"suffix", Policy::default_only},     {"logit_bias", Policy::honoured},
  };
  return k;
}

// Whether a default_only field holds its neutral value.
bool is_neutral(std::string_view name, const json& v) {
  if (v.is_null()) return true;
  if (name == "tools" || name == "functions") return v.is_array() && v.empty();
  if (name == "tool_choice" || name == "function_call") return v.is_string() && (v == "none" || v == "auto");
  if (name == "response_format") return v.is_object() && v.size() == 1 && v.value("type", json()) == "text";
  if (name == "logit_bias") return v.is_object() && v.empty();
  if (name == "modalities") return v == json::array({"text"});
  if (name == "suffix") return v.is_string() && v.get_ref<const std::string&>().empty();
  return false;
}

// The checks below stop at the first problem (BodyChecker).
struct Checker : BodyChecker {
  template <typename T>
  void number(const char* name, double lo, double hi, bool lo_open, T& out) {
    const json* v = field(name);
    if (!v || failed()) return;
    if (!v->is_number()) return wrong_type(name, "a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo)) {
      return fail("invalid_value", name,
                  quoted(name) + " must be " + (lo_open ? "greater than " : "between ") + json(lo).dump() +
                      (lo_open ? " and at most " : " and ") + json(hi).dump() + ", got " + v->dump());
    }
    out = static_cast<T>(x);
  }
  // An integer in [lo, hi]; a float such as 4.0 is a type error (clients send integers).
  bool integer(const char* name, std::int64_t lo, std::int64_t hi, std::int64_t& out, const std::string& why = "") {
    const json* v = field(name);
    if (!v || failed()) return false;
    if (!v->is_number_integer()) {
      wrong_type(name, "an integer");
      return false;
    }
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      fail("invalid_value", name, quoted(name) + " must be at most " + std::to_string(hi) + why);
      return false;
    }
    const auto x = v->get<std::int64_t>();
    if (x < lo || x > hi) {
      fail("invalid_value", name,
           quoted(name) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
               std::to_string(x) + why);
      return false;
    }
    out = x;
    return true;
  }
  void boolean(const char* name, bool& out) {
    const json* v = field(name);
    if (!v || failed()) return;
    if (!v->is_boolean()) return wrong_type(name, "true or false");
    out = v->get<bool>();
  }
  void string(const char* name, std::string& out, std::size_t max_bytes = 4096) {
    const json* v = field(name);
    if (!v || failed()) return;
    if (!v->is_string()) return wrong_type(name, "a string");
    if (v->get_ref<const std::string&>().size() > max_bytes) {
      return fail("invalid_value", name, quoted(name) + " must be at most " + std::to_string(max_bytes) + " bytes");
    }
    out = v->get<std::string>();
  }

  void fields(const std::map<std::string, Policy, std::less<>>& known, const char* route) {
    for (const auto& [name, value] : body.items()) {
      if (failed()) return;
      auto it = known.find(name);
      if (it == known.end()) {
        return fail("unknown_parameter", name,
                    "Unrecognized request argument supplied: " + name + " (" + route +
                        " accepts the fields listed in docs/SERVING.md)");
      }
      if (it->second == Policy::default_only && !is_neutral(name, value)) {
        return fail("unsupported_parameter", name,
                    quoted(name) + " is not supported by memra-host; leave it out (or null)");
      }
    }
    // Harmless fields still get a type check, so garbage is not accepted silently.
    if (const json* v = field("metadata"); v && !v->is_object()) wrong_type("metadata", "an object");
    if (const json* v = field("store"); v && !v->is_boolean()) wrong_type("store", "true or false");
    for (const char* s : {"service_tier", "prompt_cache_key", "safety_identifier"}) {
      if (const json* v = field(s); v && !v->is_string()) wrong_type(s, "a string");
    }
  }

  void model(std::string& out) {
    auto it = body.find("model");
    if (it == body.end() || it->is_null()) {
      return fail("missing_required_parameter", "model", "'model' is required; GET /v1/models lists the models");
    }
    if (!it->is_string() || it->get_ref<const std::string&>().empty()) return wrong_type("model", "a non-empty string");
    out = it->get<std::string>();
  }

  void stop_sequences(std::vector<std::string>& out) {
    const json* v = field("stop");
    if (!v || failed()) return;
    std::vector<std::string> stops;
    if (v->is_string()) {
      stops.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const auto& s : *v) {
        if (!s.is_string()) return wrong_type("stop", "a string or an array of strings");
        stops.push_back(s.get<std::string>());
      }
    } else {
      return wrong_type("stop", "a string or an array of strings");
    }
    if (stops.size() > kMaxStops) {
      return fail("invalid_value", "stop", "'stop' may hold at most " + std::to_string(kMaxStops) + " sequences");
    }
    for (const auto& s : stops) {
      if (s.empty()) return fail("invalid_value", "stop", "'stop' sequences must not be empty");
      if (s.size() > kMaxStopBytes) {
        return fail("invalid_value", "stop", "each 'stop' sequence must be at most " + std::to_string(kMaxStopBytes) + " bytes");
      }
    }
    out = std::move(stops);
  }

  void sampling(CompletionRequest& r) {
    boolean("stream", r.stream);
    if (const json* so = field("stream_options"); so && !failed()) {
      if (!so->is_object()) return wrong_type("stream_options", "an object");
      // Only include_usage has a meaning here; other keys are ignored (documented).
      auto it = so->find("include_usage");
      if (it != so->end() && !it->is_null()) {
        if (!it->is_boolean()) return wrong_type("stream_options.include_usage", "true or false");
        r.include_usage = it->get<bool>();
      }
      // As OpenAI: stream_options belongs to a streamed request.
      if (!r.stream) return fail("invalid_value", "stream_options", "'stream_options' is only allowed when 'stream' is true");
    }
    number("temperature", 0.0, 2.0, false, r.temperature);
    number("top_p", 0.0, 1.0, false, r.top_p);
    std::int64_t top_k = 0;
    if (integer("top_k", -1, std::numeric_limits<std::int32_t>::max(), top_k)) r.top_k = top_k < 0 ? 0 : static_cast<std::int32_t>(top_k);
    number("min_p", 0.0, 1.0, false, r.min_p);
    number("presence_penalty", -2.0, 2.0, false, r.presence_penalty);
    number("frequency_penalty", -2.0, 2.0, false, r.frequency_penalty);
    number("repetition_penalty", 0.0, 10.0, /*lo_open=*/true, r.repetition_penalty);
    if (const json* s = field("seed"); s && !failed()) {
      if (!s->is_number_integer()) return wrong_type("seed", "an integer");
      // Any 64-bit integer: negative seeds are taken modulo 2^64.
      r.seed = s->is_number_unsigned() ? s->get<std::uint64_t>() : static_cast<std::uint64_t>(s->get<std::int64_t>());
    }
    integer("n", 1, kMaxChoices, r.n, " (memra-host's limit)");
    std::int64_t max_tokens = 0;
    if (integer("max_tokens", 1, INT64_MAX, max_tokens)) r.max_tokens = max_tokens;
    stop_sequences(r.stop);
    string("user", r.user);
    string("cache_salt", r.cache_salt, 1024);
    boolean("ignore_eos", r.ignore_eos);
  }

  // A message's content: a string, or an array of {"type":"text","text":...} parts.
  void content(const json& c, const std::string& at, std::optional<std::string>& out) {
    if (c.is_string()) {
      out = c.get<std::string>();
      return;
    }
    if (!c.is_array()) return wrong_type(at, "a string or an array of content parts");
    std::string joined;
    for (std::size_t j = 0; j < c.size() && !failed(); ++j) {
      const json& part = c[j];
      const std::string p = at + "[" + std::to_string(j) + "]";
      if (!part.is_object()) return wrong_type(p, "an object {\"type\":\"text\",\"text\":...}");
      auto type = part.find("type");
      if (type == part.end() || !type->is_string()) {
        return fail("missing_required_parameter", p + ".type", quoted(p + ".type") + " is required (\"text\")");
      }
      if (*type != "text") {
        return fail("unsupported_content_type", p + ".type",
                    quoted(p + ".type") + " is '" + type->get<std::string>() +
                        "'; memra-host serves text models and accepts only parts of type \"text\"");
      }
      auto text = part.find("text");
      if (text == part.end() || !text->is_string()) {
        return fail("missing_required_parameter", p + ".text", quoted(p + ".text") + " is required (a string)");
      }
      for (const auto& [key, unused] : part.items()) {
        if (key != "type" && key != "text") {
          return fail("unknown_parameter", p + "." + key, "Unrecognized content part field: " + p + "." + key);
        }
      }
      if (j > 0) joined += "\n";
      joined += text->get<std::string>();
    }
    out = std::move(joined);
  }

  void messages(std::vector<ChatMessage>& out, const char* name = "messages") {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) {
      return fail("missing_required_parameter", name,
                  quoted(name) + " is required: an array of {role, content}");
    }
    if (!it->is_array()) return wrong_type(name, "an array of {role, content} objects");
    if (it->empty()) return fail("invalid_value", name, quoted(name) + " must contain at least one message");
    if (it->size() > kMaxMessages) {
      return fail("invalid_value", name, quoted(name) + " may hold at most " + std::to_string(kMaxMessages) + " messages");
    }
    static const std::set<std::string, std::less<>> kRoles = {"system", "developer", "user", "assistant", "tool"};
    for (std::size_t i = 0; i < it->size() && !failed(); ++i) {
      const json& m = (*it)[i];
      const std::string at = std::string(name) + "[" + std::to_string(i) + "]";
      if (!m.is_object()) return wrong_type(at, "an object with 'role' and 'content'");
      ChatMessage msg;
      auto role = m.find("role");
      if (role == m.end() || role->is_null()) {
        return fail("missing_required_parameter", at + ".role", quoted(at + ".role") + " is required (a string)");
      }
      if (!role->is_string()) return wrong_type(at + ".role", "a string");
      msg.role = role->get<std::string>();
      if (kRoles.count(msg.role) == 0) {
        return fail("invalid_value", at + ".role",
                    quoted(at + ".role") + " is '" + msg.role + "'; expected system, developer, user, assistant or tool");
      }
      for (const auto& [key, value] : m.items()) {
        if (failed()) return;
        const std::string p = at + "." + key;
        if (key == "role" || key == "content") continue;
        if (key == "name") {
          if (!value.is_string()) return wrong_type(p, "a string");
          msg.name = value.get<std::string>();
        } else if (key == "tool_call_id") {
          if (!value.is_string()) return wrong_type(p, "a string");
          msg.tool_call_id = value.get<std::string>();
        } else if (key == "tool_calls") {
          if (value.is_null()) continue;
          if (msg.role != "assistant") return fail("invalid_value", p, quoted(p) + ": only assistant messages carry tool calls");
          message_tool_calls(value, p, msg.tool_calls);
        } else if (key == "reasoning_content") {
          if (value.is_null()) continue;
          if (!value.is_string()) return wrong_type(p, "a string or null");
          if (msg.role != "assistant") return fail("invalid_value", p, quoted(p) + ": only assistant messages carry reasoning");
          msg.reasoning_content = value.get<std::string>();
        } else if (key == "function_call" || key == "audio") {
          if (!value.is_null()) return fail("unsupported_parameter", p, quoted(p) + " is not supported by memra-host");
        } else if (key == "refusal") {
          if (!value.is_null() && !value.is_string()) return wrong_type(p, "a string or null");
        } else {
          return fail("unknown_parameter", p, "Unrecognized message field: " + p);
        }
      }
      auto c = m.find("content");
      if (c == m.end() || c->is_null()) {
        if (msg.role != "assistant") {
          return fail("missing_required_parameter", at + ".content", quoted(at + ".content") + " is required");
        }
      } else {
        content(*c, at + ".content", msg.content);
      }
      if (msg.role == "developer") msg.role = "system";  // templates know "system"
      if (msg.role == "tool" && !failed()) {
        if (msg.tool_call_id.empty()) {
          return fail("missing_required_parameter", at + ".tool_call_id",
                      quoted(at + ".tool_call_id") + " is required: the id of the tool call this message answers");
        }
        // It must answer a call of an earlier assistant turn.
        const ToolCallIn* call = nullptr;
        for (const auto& earlier : out)
          for (const auto& c : earlier.tool_calls)
            if (c.id == msg.tool_call_id) call = &c;
        if (call == nullptr) {
          return fail("invalid_value", at + ".tool_call_id",
                      quoted(at + ".tool_call_id") + " is '" + msg.tool_call_id +
                          "', which no earlier assistant message's tool_calls has");
        }
        if (msg.name.empty()) msg.name = call->name;
      }
      out.push_back(std::move(msg));
    }
  }

  // An assistant message's tool_calls: [{"id","type":"function","function":{"name","arguments"}}].
  void message_tool_calls(const json& v, const std::string& at, std::vector<ToolCallIn>& out) {
    if (!v.is_array()) return wrong_type(at, "an array of tool calls");
    for (std::size_t k = 0; k < v.size() && !failed(); ++k) {
      const std::string p = at + "[" + std::to_string(k) + "]";
      const json& c = v[k];
      if (!c.is_object()) return wrong_type(p, "an object {\"id\",\"type\":\"function\",\"function\":{...}}");
      ToolCallIn call;
      for (const auto& [key, value] : c.items()) {
        if (key == "id") {
          if (!value.is_string()) return wrong_type(p + ".id", "a string");
          call.id = value.get<std::string>();
        } else if (key == "type") {
          if (value != "function") return fail("invalid_value", p + ".type", quoted(p + ".type") + " must be \"function\"");
        } else if (key == "function") {
          if (!value.is_object()) return wrong_type(p + ".function", "an object {\"name\",\"arguments\"}");
          for (const auto& [fk, fv] : value.items()) {
            const std::string fp = p + ".function." + fk;
            if (fk == "name") {
              if (!fv.is_string()) return wrong_type(fp, "a string");
              call.name = fv.get<std::string>();
            } else if (fk == "arguments") {
              if (!fv.is_string()) return wrong_type(fp, "a string (the arguments as JSON text)");
              call.arguments = fv.get<std::string>();
              // Parsed here, once, under the limits of any JSON from clients; text that is
              // not JSON stays text (templates show it as it is), JSON past a limit is refused.
              jsonio::ParseError why;
              call.parsed = jsonio::parse(call.arguments, jsonio::kRequestLimits, &why);
              if (!call.parsed && why.kind != jsonio::ParseError::Kind::syntax) {
                if (!error) error = json_parse_error(why, "the tool call's arguments", fp);
                return;
              }
            } else {
              return fail("unknown_parameter", fp, "Unrecognized tool call field: " + fp);
            }
          }
        } else {
          return fail("unknown_parameter", p + "." + key, "Unrecognized tool call field: " + p + "." + key);
        }
      }
      if (call.id.empty()) return fail("missing_required_parameter", p + ".id", quoted(p + ".id") + " is required");
      if (call.name.empty()) {
        return fail("missing_required_parameter", p + ".function.name", quoted(p + ".function.name") + " is required");
      }
      out.push_back(std::move(call));
    }
  }

  // "logit_bias": {"<token id>": bias in [-100, 100], ...}.
  void logit_bias(std::vector<engine::LogitBias>& out) {
    const json* v = field("logit_bias");
    if (!v || failed()) return;
    if (!v->is_object()) return wrong_type("logit_bias", "an object mapping token ids to biases");
    if (v->size() > kMaxLogitBias) {
      return fail("invalid_value", "logit_bias", "'logit_bias' may hold at most " + std::to_string(kMaxLogitBias) + " tokens");
    }
    for (const auto& [key, value] : v->items()) {
      const std::string p = "logit_bias." + key;
      std::int64_t id = -1;
      // Canonical decimal only: "01" or "+1" is not a token id.
      if (!key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos &&
          (key.size() == 1 || key[0] != '0'))
        id = std::stoll(key);
      if (id < 0 || id > INT32_MAX) {
        return fail("invalid_value", "logit_bias", "'logit_bias' keys must be token ids (decimal integers), got '" + key + "'");
      }
      if (!value.is_number()) return wrong_type(p, "a number from -100 to 100");
      const double b = value.get<double>();
      if (!(b >= -100.0 && b <= 100.0)) return fail("invalid_value", p, quoted(p) + " must be between -100 and 100");
      out.push_back({static_cast<std::int32_t>(id), static_cast<float>(b)});
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    for (std::size_t i = 1; i < out.size(); ++i)
      if (out[i].id == out[i - 1].id) return fail("invalid_value", "logit_bias", "'logit_bias' names token " + std::to_string(out[i].id) + " twice");
  }

  void template_kwargs(json& out) {
    const json* v = field("chat_template_kwargs");
    if (!v || failed()) return;
    if (!v->is_object()) return wrong_type("chat_template_kwargs", "an object of template variables");
    for (const auto& [key, value] : v->items()) {
      if (key == "messages" || key == "tools" || key == "add_generation_prompt") {
        return fail("invalid_value", "chat_template_kwargs." + key,
                    "'chat_template_kwargs." + key + "' is set by memra-host from the request; use the request field instead");
      }
    }
    out = *v;
  }

  void reasoning(std::optional<std::string>& out) {
    const json* v = field("reasoning_effort");
    if (!v || failed()) return;
    static const std::set<std::string, std::less<>> kEfforts = {"none", "minimal", "low", "medium", "high"};
    if (!v->is_string() || kEfforts.count(v->get_ref<const std::string&>()) == 0) {
      return fail("invalid_value", "reasoning_effort", "'reasoning_effort' must be none, minimal, low, medium or high");
    }
    out = v->get<std::string>();
  }

  static bool valid_function_name(const std::string& name) {
    if (name.empty() || name.size() > 64) return false;
    return name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") == std::string::npos;
  }

  void tools(std::vector<ToolDef>& out) {
    const json* v = field("tools");
    if (!v || failed()) return;
    if (!v->is_array()) return wrong_type("tools", "an array of {\"type\":\"function\",\"function\":{...}}");
    if (v->size() > kMaxTools) return fail("invalid_value", "tools", "'tools' may hold at most " + std::to_string(kMaxTools) + " tools");
    for (std::size_t i = 0; i < v->size() && !failed(); ++i) {
      const std::string at = "tools[" + std::to_string(i) + "]";
      const json& t = (*v)[i];
      if (!t.is_object()) return wrong_type(at, "an object {\"type\":\"function\",\"function\":{...}}");
      ToolDef def;
      const json* fn = nullptr;
      for (const auto& [key, value] : t.items()) {
        if (key == "type") {
          if (value != "function") {
            return fail("invalid_value", at + ".type", quoted(at + ".type") + " must be \"function\" (the only tool type memra-host runs)");
          }
        } else if (key == "function") {
          fn = &value;
        } else {
          return fail("unknown_parameter", at + "." + key, "Unrecognized tool field: " + at + "." + key);
        }
      }
      if (fn == nullptr) return fail("missing_required_parameter", at + ".function", quoted(at + ".function") + " is required");
      if (!fn->is_object()) return wrong_type(at + ".function", "an object {\"name\",\"description\",\"parameters\"}");
      for (const auto& [key, value] : fn->items()) {
        const std::string p = at + ".function." + key;
        if (key == "name") {
          if (!value.is_string()) return wrong_type(p, "a string");
          def.name = value.get<std::string>();
          if (!valid_function_name(def.name)) {
            return fail("invalid_value", p, quoted(p) + " must be 1-64 letters, digits, '_', '-' or '.'");
          }
        } else if (key == "description") {
          if (!value.is_null() && !value.is_string()) return wrong_type(p, "a string");
        } else if (key == "parameters") {
          if (value.is_null()) continue;
          if (!value.is_object()) return wrong_type(p, "a JSON Schema object");
          if (auto type = value.find("type"); type != value.end() && *type != "object") {
            return fail("invalid_value", p + ".type", quoted(p + ".type") + " must be \"object\" (arguments are a JSON object)");
          }
          def.parameters = value;
        } else if (key == "strict") {
          if (!value.is_null() && !value.is_boolean()) return wrong_type(p, "true or false");
          def.strict = value.is_boolean() && value.get<bool>();
        } else {
          return fail("unknown_parameter", p, "Unrecognized function field: " + p);
        }
      }
      if (def.name.empty()) return fail("missing_required_parameter", at + ".function.name", quoted(at + ".function.name") + " is required");
      for (const auto& other : out)
        if (other.name == def.name) return fail("invalid_value", at + ".function.name", "two tools are named '" + def.name + "'");
      if (def.parameters.is_null()) def.parameters = json::object();
      def.raw = t;
      out.push_back(std::move(def));
    }
  }

  void tool_choice(const std::vector<ToolDef>& defs, ToolChoice& out) {
    out.mode = defs.empty() ? ToolChoiceMode::none : ToolChoiceMode::automatic;
    const json* v = field("tool_choice");
    if (!v || failed()) return;
    if (v->is_string()) {
      const auto& s = v->get_ref<const std::string&>();
      if (s == "none") out.mode = ToolChoiceMode::none;
      else if (s == "auto") out.mode = defs.empty() ? ToolChoiceMode::none : ToolChoiceMode::automatic;
      else if (s == "required") out.mode = ToolChoiceMode::required;
      else return fail("invalid_value", "tool_choice", "'tool_choice' must be none, auto, required or {\"type\":\"function\",\"function\":{\"name\"}}");
    } else if (v->is_object()) {
      auto fn = v->find("function");
      if (v->value("type", json()) != "function" || fn == v->end() || !fn->is_object() || !fn->contains("name") ||
          !(*fn)["name"].is_string()) {
        return fail("invalid_value", "tool_choice", "'tool_choice' as an object must be {\"type\":\"function\",\"function\":{\"name\":...}}");
      }
      out.mode = ToolChoiceMode::named;
      out.name = (*fn)["name"].get<std::string>();
      if (std::none_of(defs.begin(), defs.end(), [&](const ToolDef& d) { return d.name == out.name; })) {
        return fail("invalid_value", "tool_choice", "'tool_choice' names '" + out.name + "', which is not in 'tools'");
      }
    } else {
      return wrong_type("tool_choice", "a string or an object");
    }
    if ((out.mode == ToolChoiceMode::required || out.mode == ToolChoiceMode::named) && defs.empty()) {
      return fail("invalid_value", "tool_choice", "'tool_choice' asks for a tool call but 'tools' is empty");
    }
  }

  void response_format(ResponseFormat& out) {
    const json* v = field("response_format");
    if (!v || failed()) return;
    if (!v->is_object()) return wrong_type("response_format", "an object {\"type\": ...}");
    auto type = v->find("type");
    if (type == v->end() || !type->is_string()) {
      return fail("missing_required_parameter", "response_format.type", "'response_format.type' is required: text, json_object or json_schema");
    }
    const auto& t = type->get_ref<const std::string&>();
    for (const auto& [key, unused] : v->items()) {
      if (key != "type" && !(t == "json_schema" && key == "json_schema")) {
        return fail("unknown_parameter", "response_format." + key, "Unrecognized field: response_format." + key);
      }
    }
    if (t == "text") {
      out.type = ResponseFormatType::text;
    } else if (t == "json_object") {
      out.type = ResponseFormatType::json_object;
    } else if (t == "json_schema") {
      out.type = ResponseFormatType::json_schema;
      auto js = v->find("json_schema");
      if (js == v->end() || js->is_null()) {
        return fail("missing_required_parameter", "response_format.json_schema", "'response_format.json_schema' is required");
      }
      if (!js->is_object()) return wrong_type("response_format.json_schema", "an object {\"name\",\"schema\",\"strict\"}");
      for (const auto& [key, value] : js->items()) {
        const std::string p = "response_format.json_schema." + key;
        if (key == "name") {
          if (!value.is_string()) return wrong_type(p, "a string");
          out.name = value.get<std::string>();
          if (!valid_function_name(out.name)) return fail("invalid_value", p, quoted(p) + " must be 1-64 letters, digits, '_', '-' or '.'");
        } else if (key == "description") {
          if (!value.is_null() && !value.is_string()) return wrong_type(p, "a string");
        } else if (key == "schema") {
          if (!value.is_object() && !value.is_boolean()) return wrong_type(p, "a JSON Schema (an object)");
          out.schema = value;
        } else if (key == "strict") {
          if (!value.is_null() && !value.is_boolean()) return wrong_type(p, "true or false");
          out.strict = value.is_boolean() && value.get<bool>();
        } else {
          return fail("unknown_parameter", p, "Unrecognized field: " + p);
        }
      }
      if (out.name.empty()) {
        return fail("missing_required_parameter", "response_format.json_schema.name", "'response_format.json_schema.name' is required");
      }
      if (out.schema.is_null()) out.schema = json::object();
    } else {
      return fail("invalid_value", "response_format.type", "'response_format.type' must be text, json_object or json_schema");
    }
  }

  void prompt(std::vector<PromptInput>& out) {
    auto it = body.find("prompt");
    if (it == body.end() || it->is_null()) {
      return fail("missing_required_parameter", "prompt", "'prompt' is required: a string or token ids");
    }
    const json& p = *it;
    const char* expected = "a string, an array of strings, an array of token ids or an array of arrays of token ids";
    if (p.is_string()) {
      out.push_back({false, p.get<std::string>(), {}});
      return;
    }
    if (!p.is_array() || p.empty()) return wrong_type("prompt", expected);
    auto token = [](const json& t, std::int32_t& id) {
      if (!t.is_number_integer()) return false;
      if (t.is_number_unsigned() ? t.get<std::uint64_t>() > INT32_MAX : (t.get<std::int64_t>() < 0 || t.get<std::int64_t>() > INT32_MAX)) return false;
      id = static_cast<std::int32_t>(t.get<std::int64_t>());
      return true;
    };
    if (p[0].is_string()) {
      for (const auto& e : p) {
        if (!e.is_string()) return wrong_type("prompt", expected);
        out.push_back({false, e.get<std::string>(), {}});
      }
    } else if (p[0].is_array()) {
      for (const auto& e : p) {
        if (!e.is_array() || e.empty()) return wrong_type("prompt", expected);
        PromptInput in{true, {}, {}};
        for (const auto& t : e) {
          std::int32_t id = 0;
          if (!token(t, id)) return wrong_type("prompt", expected);
          in.tokens.push_back(id);
        }
        out.push_back(std::move(in));
      }
    } else {
      PromptInput in{true, {}, {}};
      for (const auto& t : p) {
        std::int32_t id = 0;
        if (!token(t, id)) return wrong_type("prompt", expected);
        in.tokens.push_back(id);
      }
      out.push_back(std::move(in));
    }
    if (out.size() > kMaxPrompts) {
      fail("invalid_value", "prompt", "'prompt' may hold at most " + std::to_string(kMaxPrompts) + " prompts");
    }
  }
};

// Parses `body` as a JSON object under the request limits, or sets `error`.
std::optional<json> parse_object(std::string_view body, std::optional<ApiError>& error) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    error = errors::invalid_json("the body is empty; send a JSON object");
    return std::nullopt;
  }
  jsonio::ParseError why;
  auto doc = jsonio::parse(body, jsonio::kRequestLimits, &why);
  if (!doc) {
    error = json_parse_error(why, "the request body");
    return std::nullopt;
  }
  if (!doc->is_object()) {
    error = errors::invalid_request("invalid_body", "the request body must be a JSON object", std::nullopt);
    return std::nullopt;
  }
  return doc;
}

}  // namespace

ApiError json_parse_error(const jsonio::ParseError& e, std::string_view what, std::string param) {
  if (e.kind == jsonio::ParseError::Kind::syntax) {
    if (param.empty()) return errors::invalid_json(e.message);
    return errors::invalid_request("invalid_json", server::quoted(param) + " is not valid JSON: " + e.message, param);
  }
  // A limit: name the field (the body's top-level field, or the given one) and the place.
  std::string where = param;
  if (!e.path.empty()) where = param.empty() ? e.path : param + " (at " + e.path + ")";
  if (param.empty()) param = jsonio::top_field(e.path);
  return errors::invalid_request(
      "json_limit_exceeded",
      std::string(what) + (where.empty() ? "" : " at " + server::quoted(where)) + " has " + e.message +
          ", past memra-host's limit for JSON from clients (docs/SERVING.md, \"Request limits\"); send a smaller or flatter value",
      param.empty() ? std::nullopt : std::optional<std::string>(param));
}

std::vector<std::pair<std::string, std::string>> field_policies(CompletionKind kind) {
  return policy_table(kind == CompletionKind::chat ? chat_fields() : text_fields());
}

Validation validate_completion_body(CompletionKind kind, std::string_view body) {
  Validation out;
  auto doc = parse_object(body, out.error);
  if (!doc) return out;
  return validate_completion_json(kind, *doc);
}

std::optional<nlohmann::ordered_json> parse_json_body(std::string_view body, std::optional<ApiError>& error) {
  return parse_object(body, error);
}

Validation validate_completion_json(CompletionKind kind, const nlohmann::ordered_json& body) {
  Validation out;
  const json* doc = &body;
  Checker check{{*doc}};
  CompletionRequest r;
  r.kind = kind;
  check.model(r.model);
  if (kind == CompletionKind::chat) {
    check.fields(chat_fields(), "/v1/chat/completions");
    check.messages(r.messages);
    check.sampling(r);
    std::int64_t mct = 0;
    if (check.integer("max_completion_tokens", 1, INT64_MAX, mct)) {
      if (r.max_tokens && *r.max_tokens != mct) {
        check.fail("invalid_value", "max_tokens",
                   "'max_tokens' and 'max_completion_tokens' disagree; send only max_completion_tokens");
      }
      r.max_tokens = mct;
    }
    check.boolean("logprobs", r.logprobs);
    check.logit_bias(r.logit_bias);
    check.template_kwargs(r.chat_template_kwargs);
    check.reasoning(r.reasoning_effort);
    std::int64_t budget = 0;
    if (check.integer("thinking_token_budget", 0, INT64_MAX, budget)) r.thinking_token_budget = budget;
    check.tools(r.tools);
    check.tool_choice(r.tools, r.tool_choice);
    check.boolean("parallel_tool_calls", r.parallel_tool_calls);
    check.response_format(r.response_format);
    if (!check.failed() && r.ignore_eos &&
        (r.response_format.type != ResponseFormatType::text || r.tool_choice.mode == ToolChoiceMode::required ||
         r.tool_choice.mode == ToolChoiceMode::named)) {
      check.fail("unsupported_parameter", "ignore_eos",
                 "'ignore_eos' cannot be combined with a constrained output (response_format or a required tool call), "
                 "which ends at the model's end-of-text token");
    }
    std::int64_t top = 0;
    if (check.integer("top_logprobs", 0, kMaxTopLogprobs, top)) {
      r.top_logprobs = static_cast<std::int32_t>(top);
      if (!r.logprobs && !check.failed()) {
        check.fail("invalid_value", "top_logprobs", "'top_logprobs' needs 'logprobs': true");
      }
    }
  } else {
    check.fields(text_fields(), "/v1/completions");
    check.prompt(r.prompts);
    check.sampling(r);
    check.boolean("echo", r.echo);
    check.logit_bias(r.logit_bias);
    std::int64_t lp = 0;
    if (check.integer("logprobs", 0, kMaxTopLogprobs, lp)) {
      r.logprobs = true;
      r.top_logprobs = static_cast<std::int32_t>(lp);
    }
    std::int64_t best_of = 0;
    if (check.integer("best_of", 1, kMaxChoices, best_of) && best_of != 1 && best_of != r.n) {
      check.fail("unsupported_parameter", "best_of",
                 "'best_of' other than 1 or n is not supported (memra-host does not rank candidates)");
    }
    if (r.echo && r.logprobs && !check.failed()) {
      check.fail("unsupported_parameter", "echo",
                 "'echo' together with 'logprobs' is not supported (prompt logprobs are not computed); drop one");
    }
    if (!check.failed() && r.prompts.size() * static_cast<std::size_t>(r.n) > kMaxPrompts) {
      check.fail("invalid_value", "n",
                 "prompts x n is " + std::to_string(r.prompts.size() * static_cast<std::size_t>(r.n)) +
                     "; memra-host answers at most " + std::to_string(kMaxPrompts) + " choices per request");
    }
  }
  if (check.failed()) {
    out.error = std::move(check.error);
    return out;
  }
  out.request = std::move(r);
  return out;
}

Parsed<TokenizeRequest> parse_tokenize_body(std::string_view body) {
  Parsed<TokenizeRequest> out;
  auto doc = parse_object(body, out.error);
  if (!doc) return out;
  Checker check{{*doc}};
  TokenizeRequest r;
  check.model(r.model);
  for (const auto& [key, unused] : doc->items()) {
    if (key != "model" && key != "prompt" && key != "messages" && key != "add_special_tokens" &&
        key != "add_generation_prompt") {
      check.fail("unknown_parameter", key, "Unrecognized request argument supplied: " + key +
                                               " (/tokenize takes model, prompt or messages, add_special_tokens, "
                                               "add_generation_prompt)");
      break;
    }
  }
  const bool has_prompt = check.field("prompt") != nullptr;
  const bool has_messages = check.field("messages") != nullptr;
  if (!check.failed() && has_prompt == has_messages) {
    check.fail(has_prompt ? "invalid_value" : "missing_required_parameter", "prompt",
               "give exactly one of 'prompt' (a string) and 'messages' (a chat)");
  }
  if (has_prompt && !check.failed()) {
    const json* p = check.field("prompt");
    if (!p->is_string()) check.wrong_type("prompt", "a string");
    else r.prompt = p->get<std::string>();
  }
  if (has_messages && !check.failed()) check.messages(r.messages);
  bool special = false;
  if (check.field("add_special_tokens")) {
    check.boolean("add_special_tokens", special);
    r.add_special_tokens = special;
  }
  check.boolean("add_generation_prompt", r.add_generation_prompt);
  if (check.failed()) {
    out.error = std::move(check.error);
    return out;
  }
  out.value = std::move(r);
  return out;
}

Parsed<DetokenizeRequest> parse_detokenize_body(std::string_view body) {
  Parsed<DetokenizeRequest> out;
  auto doc = parse_object(body, out.error);
  if (!doc) return out;
  Checker check{{*doc}};
  DetokenizeRequest r;
  check.model(r.model);
  for (const auto& [key, unused] : doc->items()) {
    if (key != "model" && key != "tokens") {
      check.fail("unknown_parameter", key, "Unrecognized request argument supplied: " + key +
                                               " (/detokenize takes model and tokens)");
      break;
    }
  }
  const json* t = check.field("tokens");
  if (!check.failed() && t == nullptr) {
    check.fail("missing_required_parameter", "tokens", "'tokens' is required: an array of token ids");
  }
  if (!check.failed()) {
    if (!t->is_array()) {
      check.wrong_type("tokens", "an array of token ids");
    } else {
      for (const auto& id : *t) {
        if (!id.is_number_integer() || (id.is_number_unsigned() && id.get<std::uint64_t>() > INT64_MAX)) {
          check.wrong_type("tokens", "an array of integer token ids");
          break;
        }
        r.tokens.push_back(id.get<std::int64_t>());
      }
    }
  }
  if (check.failed()) {
    out.error = std::move(check.error);
    return out;
  }
  out.value = std::move(r);
  return out;
}

}  // namespace memra::server
