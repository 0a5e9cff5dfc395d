#include "host/server/responses_request.hpp"

#include <map>

#include "host/server/body_checker.hpp"

namespace memra::server {
namespace {

using json = nlohmann::ordered_json;

using Policy = FieldPolicy;

const std::map<std::string, Policy, std::less<>>& fields() {
  static const std::map<std::string, Policy, std::less<>> k = {
      {"model", Policy::honoured},        {"input", Policy::honoured},
      {"instructions", Policy::honoured}, {"tools", Policy::honoured},
      {"tool_choice", Policy::honoured},  {"parallel_tool_calls", Policy::honoured},
      {"max_output_tokens", Policy::honoured}, {"temperature", Policy::honoured},
      {"top_p", Policy::honoured},        {"text", Policy::honoured},
      {"stream", Policy::honoured},       {"previous_response_id", Policy::honoured},
      {"store", Policy::honoured},        {"reasoning", Policy::honoured},
      {"user", Policy::honoured},         {"seed", Policy::honoured},
      {"top_k", Policy::honoured},        {"min_p", Policy::honoured},
      {"metadata", Policy::harmless},     {"service_tier", Policy::harmless},
      {"prompt_cache_key", Policy::harmless}, {"safety_identifier", Policy::harmless},
      {"truncation", Policy::default_only}, {"include", Policy::default_only},
      {"background", Policy::default_only}, {"top_logprobs", Policy::default_only},
      {"max_tool_calls", Policy::default_only}, {"prompt", Policy::default_only},
      {"conversation", Policy::default_only}, {"stream_options", Policy::default_only},
  };
  return k;
}

bool is_neutral(std::string_view name, const json& v) {
  if (v.is_null()) return true;
  if (name == "truncation") return v == "disabled";
  if (name == "include") return v.is_array() && v.empty();
  if (name == "background") return v == false;
  if (name == "top_logprobs") return v == 0;
  if (name == "stream_options") {  // only {} or {"include_obfuscation": false}
    if (!v.is_object()) return false;
    for (const auto& [k, x] : v.items())
      if (k != "include_obfuscation" || !(x.is_null() || x == false)) return false;
    return true;
  }
  return false;
}

struct Translator : BodyChecker {
  void check_fields() {
    for (const auto& [name, value] : body.items()) {
      if (failed()) return;
      auto it = fields().find(name);
      if (it == fields().end()) {
        return fail("unknown_parameter", name,
                    "Unrecognized request argument supplied: " + name +
                        " (/v1/responses accepts the fields listed in docs/SERVING.md)");
      }
      if (it->second == Policy::default_only && !is_neutral(name, value)) {
        return fail("unsupported_parameter", name, quoted(name) + " is not supported by memra-host; leave it out (or null)");
      }
    }
    if (const json* v = field("metadata"); v && !v->is_object()) wrong_type("metadata", "an object");
    for (const char* s : {"service_tier", "prompt_cache_key", "safety_identifier"}) {
      if (const json* v = field(s); v && !v->is_string()) wrong_type(s, "a string");
    }
  }

  // A content array's text: input_text / output_text parts (joined with "\n"), or a string.
  std::optional<std::string> text_of(const json& c, const std::string& at) {
    if (c.is_string()) return c.get<std::string>();
    if (!c.is_array()) {
      wrong_type(at, "a string or an array of content parts");
      return std::nullopt;
    }
    std::string joined;
    for (std::size_t j = 0; j < c.size(); ++j) {
      const std::string p = at + "[" + std::to_string(j) + "]";
      const json& part = c[j];
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
        wrong_type(p, "an object {\"type\":\"input_text\",\"text\":...}");
        return std::nullopt;
      }
      const std::string type = part["type"].get<std::string>();
      if (type != "input_text" && type != "output_text" && type != "text" && type != "refusal") {
        fail("unsupported_content_type", p + ".type",
             quoted(p + ".type") + " is '" + type +
                 "'; memra-host serves text models and accepts only input_text and output_text parts");
        return std::nullopt;
      }
      const char* key = type == "refusal" ? "refusal" : "text";
      if (!part.contains(key) || !part[key].is_string()) {
        fail("missing_required_parameter", p + "." + key, quoted(p + "." + key) + " is required (a string)");
        return std::nullopt;
      }
      for (const auto& [k, unused] : part.items()) {
        if (k != "type" && k != key && k != "annotations" && k != "logprobs") {
          fail("unknown_parameter", p + "." + k, "Unrecognized content part field: " + p + "." + k);
          return std::nullopt;
        }
      }
      if (j > 0) joined += "\n";
      joined += part[key].get<std::string>();
    }
    return joined;
  }

  // `input` as chat messages.
  json input() {
    json messages = json::array();
    const json* in = field("input");
    if (in == nullptr) {
      fail("missing_required_parameter", "input", "'input' is required: a string or an array of input items");
      return messages;
    }
    if (in->is_string()) {
      messages.push_back({{"role", "user"}, {"content", *in}});
      return messages;
    }
    if (!in->is_array()) {
      wrong_type("input", "a string or an array of input items");
      return messages;
    }
    if (in->empty()) {
      fail("invalid_value", "input", "'input' must contain at least one item");
      return messages;
    }
    std::optional<std::string> reasoning;  // a reasoning item, for the next assistant turn
    for (std::size_t i = 0; i < in->size() && !failed(); ++i) {
      const json& item = (*in)[i];
      const std::string at = "input[" + std::to_string(i) + "]";
      if (!item.is_object()) {
        wrong_type(at, "an input item object");
        break;
      }
      std::string type = "message";
      if (auto t = item.find("type"); t != item.end() && !t->is_null()) {
        if (!t->is_string()) {
          wrong_type(at + ".type", "a string");
          break;
        }
        type = t->get<std::string>();
      }
      auto allow = [&](std::initializer_list<const char*> keys) {
        for (const auto& [k, unused] : item.items()) {
          bool known = false;
          for (const char* key : keys) known = known || k == key;
          if (!known) {
            fail("unknown_parameter", at + "." + k, "Unrecognized input item field: " + at + "." + k);
            return false;
          }
        }
        return true;
      };
      auto string_field = [&](const char* key, std::string& out) {
        auto v = item.find(key);
        if (v == item.end() || v->is_null()) {
          fail("missing_required_parameter", at + "." + key, quoted(at + "." + key) + " is required");
          return false;
        }
        if (!v->is_string()) {
          wrong_type(at + "." + key, "a string");
          return false;
        }
        out = v->get<std::string>();
        return true;
      };
      if (type == "message") {
        if (!allow({"type", "role", "content", "id", "status"})) break;
        std::string role;
        if (!string_field("role", role)) break;
        if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
          fail("invalid_value", at + ".role", quoted(at + ".role") + " is '" + role + "'; expected user, assistant, system or developer");
          break;
        }
        auto c = item.find("content");
        if (c == item.end() || c->is_null()) {
          fail("missing_required_parameter", at + ".content", quoted(at + ".content") + " is required");
          break;
        }
        auto text = text_of(*c, at + ".content");
        if (!text) break;
        json m = {{"role", role}, {"content", *text}};
        if (role == "assistant" && reasoning) m["reasoning_content"] = *std::exchange(reasoning, std::nullopt);
        messages.push_back(std::move(m));
      } else if (type == "function_call") {
        if (!allow({"type", "call_id", "name", "arguments", "id", "status"})) break;
        std::string call_id, name, arguments;
        if (!string_field("call_id", call_id) || !string_field("name", name) || !string_field("arguments", arguments)) break;
        json call = {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}};
        // Calls right after an assistant turn (or each other) belong to that turn.
        if (!messages.empty() && messages.back()["role"] == "assistant") {
          json& last = messages.back();
          if (!last.contains("tool_calls")) last["tool_calls"] = json::array();
          last["tool_calls"].push_back(std::move(call));
        } else {
          json m = {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({std::move(call)})}};
          if (reasoning) m["reasoning_content"] = *std::exchange(reasoning, std::nullopt);
          messages.push_back(std::move(m));
        }
      } else if (type == "function_call_output") {
        if (!allow({"type", "call_id", "output", "id", "status"})) break;
        std::string call_id;
        if (!string_field("call_id", call_id)) break;
        auto o = item.find("output");
        if (o == item.end() || o->is_null()) {
          fail("missing_required_parameter", at + ".output", quoted(at + ".output") + " is required");
          break;
        }
        auto text = text_of(*o, at + ".output");
        if (!text) break;
        messages.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", *text}});
      } else if (type == "reasoning") {
        if (!allow({"type", "id", "summary", "content", "encrypted_content", "status"})) break;
        if (auto e = item.find("encrypted_content"); e != item.end() && !e->is_null()) {
          fail("unsupported_parameter", at + ".encrypted_content", quoted(at + ".encrypted_content") + " is not supported by memra-host");
          break;
        }
        std::string text;
        if (auto c = item.find("content"); c != item.end() && c->is_array()) {
          for (const auto& part : *c)
            if (part.is_object() && part.value("type", "") == "reasoning_text" && part.contains("text") && part["text"].is_string())
              text += part["text"].get<std::string>();
        } else if (c != item.end() && !c->is_null()) {
          wrong_type(at + ".content", "an array of reasoning_text parts");
          break;
        }
        reasoning = text;
      } else {
        fail("unsupported_parameter", at + ".type",
             quoted(at + ".type") + " is '" + type +
                 "'; memra-host takes message, function_call, function_call_output and reasoning items");
      }
    }
    return messages;
  }

  // Responses function tools ({"type":"function","name",...}) as chat tools.
  json tools() {
    json out = json::array();
    const json* v = field("tools");
    if (v == nullptr || failed()) return out;
    if (!v->is_array()) {
      wrong_type("tools", "an array of {\"type\":\"function\",\"name\",...}");
      return out;
    }
    for (std::size_t i = 0; i < v->size() && !failed(); ++i) {
      const json& t = (*v)[i];
      const std::string at = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) {
        wrong_type(at, "an object {\"type\":\"function\",\"name\",...}");
        break;
      }
      if (t.value("type", json()) != "function") {
        fail("unsupported_parameter", at + ".type",
             quoted(at + ".type") + " must be \"function\" (the only tool type memra-host runs; built-in tools such as "
                                    "web_search are not available)");
        break;
      }
      json fn = json::object();
      for (const auto& [k, value] : t.items()) {
        if (k == "type") continue;
        if (k != "name" && k != "description" && k != "parameters" && k != "strict") {
          fail("unknown_parameter", at + "." + k, "Unrecognized tool field: " + at + "." + k);
          break;
        }
        fn[k] = value;
      }
      out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    return out;
  }

  std::optional<json> tool_choice() {
    const json* v = field("tool_choice");
    if (v == nullptr || failed()) return std::nullopt;
    if (v->is_string()) return *v;
    if (v->is_object() && v->value("type", json()) == "function") {
      for (const auto& [k, unused] : v->items()) {
        if (k != "type" && k != "name") {
          fail("unknown_parameter", "tool_choice." + k, "Unrecognized field: tool_choice." + k);
          return std::nullopt;
        }
      }
      if (!v->contains("name") || !(*v)["name"].is_string()) {
        fail("missing_required_parameter", "tool_choice.name", "'tool_choice.name' is required (a string)");
        return std::nullopt;
      }
      return json{{"type", "function"}, {"function", {{"name", (*v)["name"]}}}};
    }
    if (v->is_object()) {
      fail("unsupported_parameter", "tool_choice",
           "'tool_choice' must be none, auto, required or {\"type\":\"function\",\"name\"}; other tool choices are not "
           "supported by memra-host");
      return std::nullopt;
    }
    wrong_type("tool_choice", "a string or an object");
    return std::nullopt;
  }

  // text: {"format": {"type": "text" | "json_object" | "json_schema", ...}, "verbosity"?}.
  std::optional<json> response_format() {
    const json* v = field("text");
    if (v == nullptr || failed()) return std::nullopt;
    if (!v->is_object()) {
      wrong_type("text", "an object {\"format\": ...}");
      return std::nullopt;
    }
    for (const auto& [k, value] : v->items()) {
      if (k == "format") continue;
      if (k == "verbosity") {
        if (!value.is_null() && value != "medium") {
          fail("unsupported_parameter", "text.verbosity", "'text.verbosity' is not supported by memra-host (only null or \"medium\")");
          return std::nullopt;
        }
        continue;
      }
      fail("unknown_parameter", "text." + k, "Unrecognized field: text." + k);
      return std::nullopt;
    }
    auto f = v->find("format");
    if (f == v->end() || f->is_null()) return std::nullopt;
    if (!f->is_object()) {
      wrong_type("text.format", "an object {\"type\": ...}");
      return std::nullopt;
    }
    auto type = f->find("type");
    if (type == f->end() || !type->is_string()) {
      fail("missing_required_parameter", "text.format.type", "'text.format.type' is required: text, json_object or json_schema");
      return std::nullopt;
    }
    if (*type != "json_schema") return *f;  // text / json_object: the chat form; anything else the chat check refuses
    json schema = json::object();
    for (const auto& [k, value] : f->items()) {
      if (k == "type") continue;
      if (k != "name" && k != "schema" && k != "strict" && k != "description") {
        fail("unknown_parameter", "text.format." + k, "Unrecognized field: text.format." + k);
        return std::nullopt;
      }
      schema[k] = value;
    }
    return json{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
  }
};

// The chat validator's param, in the Responses request's terms.
std::string responses_param(const std::string& chat) {
  auto starts = [&](const char* p) { return chat.rfind(p, 0) == 0; };
  if (starts("messages")) return "input";  // its indices are the chat's, not the input's
  if (chat == "max_completion_tokens" || chat == "max_tokens") return "max_output_tokens";
  if (starts("response_format.json_schema")) return "text.format" + chat.substr(std::string("response_format.json_schema").size());
  if (starts("response_format")) return "text.format" + chat.substr(std::string("response_format").size());
  if (starts("tools[")) {
    const auto fn = chat.find(".function");
    if (fn != std::string::npos) return chat.substr(0, fn) + chat.substr(fn + std::string(".function").size());
  }
  if (starts("tool_choice")) return "tool_choice";
  if (starts("chat_template_kwargs") || starts("reasoning_effort")) return "reasoning.effort";
  return chat;
}

std::string renamed_message(std::string message, const std::string& from, const std::string& to) {
  if (from == to) return message;
  for (std::size_t at = message.find("'" + from); at != std::string::npos; at = message.find("'" + from, at + to.size())) {
    message.replace(at + 1, from.size(), to);
  }
  return message;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> responses_field_policies() {
  return policy_table(fields());
}

Parsed<ResponsesRequest> parse_responses_body(std::string_view body) {
  Parsed<ResponsesRequest> out;
  auto doc = parse_json_body(body, out.error);
  if (!doc) return out;
  Translator t{{*doc}};
  ResponsesRequest r;
  json& chat = r.chat;
  chat = json::object();
  if (auto m = doc->find("model"); m != doc->end()) chat["model"] = *m;
  t.check_fields();
  if (!t.failed()) chat["messages"] = t.input();
  if (const json* v = t.field("instructions"); v && !t.failed()) {
    if (!v->is_string()) t.wrong_type("instructions", "a string");
    else r.instructions = v->get<std::string>();
  }
  if (const json* v = t.field("previous_response_id"); v && !t.failed()) {
    if (!v->is_string() || v->get_ref<const std::string&>().empty()) t.wrong_type("previous_response_id", "a non-empty string");
    else r.previous_response_id = v->get<std::string>();
  }
  if (const json* v = t.field("store"); v && !t.failed()) {
    if (!v->is_boolean()) t.wrong_type("store", "true or false");
    else r.store = v->get<bool>();
  }
  if (const json* v = t.field("stream"); v && !t.failed()) {
    if (!v->is_boolean()) t.wrong_type("stream", "true or false");
    else r.stream = v->get<bool>();
  }
  // Fields with the same name and meaning in a chat request.
  for (const char* same : {"temperature", "top_p", "parallel_tool_calls", "user", "seed", "top_k", "min_p", "metadata",
                           "service_tier", "prompt_cache_key", "safety_identifier"}) {
    if (const json* v = t.field(same)) chat[same] = *v;
  }
  if (const json* v = t.field("max_output_tokens")) chat["max_completion_tokens"] = *v;
  if (json tools = t.tools(); !tools.empty()) chat["tools"] = std::move(tools);
  if (auto choice = t.tool_choice()) chat["tool_choice"] = std::move(*choice);
  if (auto format = t.response_format()) chat["response_format"] = std::move(*format);
  if (const json* v = t.field("reasoning"); v && !t.failed()) {
    if (!v->is_object()) {
      t.wrong_type("reasoning", "an object {\"effort\",\"summary\"}");
    } else {
      for (const auto& [k, value] : v->items()) {
        if (k == "effort") {
          if (!value.is_null()) chat["reasoning_effort"] = value;
        } else if (k == "summary" || k == "generate_summary") {
          if (!value.is_null() && !value.is_string()) t.wrong_type("reasoning." + k, "a string");
        } else {
          t.fail("unknown_parameter", "reasoning." + k, "Unrecognized field: reasoning." + k);
        }
      }
    }
  }
  if (t.failed()) {
    out.error = std::move(t.error);
    return out;
  }
  // What the Response object repeats of the request.
  json& echo = r.echo;
  echo["instructions"] = r.instructions ? json(*r.instructions) : json(nullptr);
  echo["max_output_tokens"] = t.field("max_output_tokens") ? *t.field("max_output_tokens") : json(nullptr);
  echo["metadata"] = t.field("metadata") ? *t.field("metadata") : json::object();
  echo["parallel_tool_calls"] = t.field("parallel_tool_calls") ? *t.field("parallel_tool_calls") : json(true);
  echo["previous_response_id"] = r.previous_response_id ? json(*r.previous_response_id) : json(nullptr);
  json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (const json* v = t.field("reasoning"))
    for (const auto& [k, value] : v->items()) reasoning[k] = value;
  echo["reasoning"] = std::move(reasoning);
  echo["store"] = r.store;
  echo["temperature"] = t.field("temperature") ? *t.field("temperature") : json(1.0);
  json text = {{"format", {{"type", "text"}}}};
  if (const json* v = t.field("text"); v && v->contains("format") && !(*v)["format"].is_null()) text["format"] = (*v)["format"];
  echo["text"] = std::move(text);
  echo["tool_choice"] = t.field("tool_choice") ? *t.field("tool_choice") : json("auto");
  echo["tools"] = t.field("tools") ? *t.field("tools") : json::array();
  echo["top_p"] = t.field("top_p") ? *t.field("top_p") : json(1.0);
  echo["truncation"] = "disabled";
  if (const json* user = t.field("user"); user && !user->is_null()) echo["user"] = *user;  // (omitted when not given)
  out.value = std::move(r);
  return out;
}

Validation responses_chat_request(const ResponsesRequest& request, const nlohmann::ordered_json& history) {
  json chat = request.chat;
  json messages = json::array();
  if (request.instructions) messages.push_back({{"role", "system"}, {"content", *request.instructions}});
  for (const auto& m : history) messages.push_back(m);
  for (const auto& m : request.chat["messages"]) messages.push_back(m);
  chat["messages"] = std::move(messages);
  Validation v = validate_completion_json(CompletionKind::chat, chat);
  if (v.error && v.error->param) {
    const std::string from = *v.error->param, to = responses_param(from);
    v.error->message = renamed_message(v.error->message, from, to);
    v.error->param = to;
  }
  return v;
}

}  // namespace memra::server
