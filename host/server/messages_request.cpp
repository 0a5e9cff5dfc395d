#include "host/server/messages_request.hpp"

#include <map>

#include "host/server/body_checker.hpp"

namespace memra::server {
namespace {

using json = nlohmann::ordered_json;

using Policy = FieldPolicy;

const std::map<std::string, Policy, std::less<>>& fields() {
  static const std::map<std::string, Policy, std::less<>> k = {
      {"model", Policy::honoured},          {"messages", Policy::honoured},
      {"max_tokens", Policy::honoured},     {"system", Policy::honoured},
      {"stop_sequences", Policy::honoured}, {"stream", Policy::honoured},
      {"temperature", Policy::honoured},    {"top_p", Policy::honoured},
      {"top_k", Policy::honoured},          {"tools", Policy::honoured},
      {"tool_choice", Policy::honoured},    {"thinking", Policy::honoured},
      {"metadata", Policy::harmless},       {"service_tier", Policy::harmless},
      {"container", Policy::default_only},  {"mcp_servers", Policy::default_only},
  };
  return k;
}

struct Translator : BodyChecker {
  void check_fields() {
    for (const auto& [name, value] : body.items()) {
      if (failed()) return;
      auto it = fields().find(name);
      if (it == fields().end()) {
        return fail("unknown_parameter", name, name + ": Extra inputs are not permitted (/v1/messages accepts the fields "
                                                      "listed in docs/SERVING.md)");
      }
      if (it->second == Policy::default_only && !value.is_null()) {
        return fail("unsupported_parameter", name, quoted(name) + " is not supported by memra-host; leave it out");
      }
    }
    if (const json* v = field("metadata"); v && !v->is_object()) wrong_type("metadata", "an object");
    if (const json* v = field("service_tier"); v && !v->is_string()) wrong_type("service_tier", "a string");
  }

  // A text block's text (text blocks only).
  std::optional<std::string> text_block(const json& b, const std::string& at) {
    if (!only_keys(b, at, {"type", "text", "cache_control", "citations"})) return std::nullopt;
    auto t = b.find("text");
    if (t == b.end() || !t->is_string()) {
      fail("missing_required_parameter", at + ".text", quoted(at + ".text") + " is required (a string)");
      return std::nullopt;
    }
    if (auto c = b.find("citations"); c != b.end() && !c->is_null() && !(c->is_array() && c->empty())) {
      fail("unsupported_parameter", at + ".citations", quoted(at + ".citations") + " is not supported by memra-host");
      return std::nullopt;
    }
    return t->get<std::string>();
  }

  // Text of a string or an array of text blocks (system, tool_result content).
  std::optional<std::string> texts(const json& v, const std::string& at) {
    if (v.is_string()) return v.get<std::string>();
    if (!v.is_array()) {
      wrong_type(at, "a string or an array of text blocks");
      return std::nullopt;
    }
    std::string joined;
    for (std::size_t j = 0; j < v.size(); ++j) {
      const std::string p = at + "." + std::to_string(j);
      const json& b = v[j];
      if (!b.is_object() || b.value("type", json()) != "text") {
        if (b.is_object() && b.contains("type") && b["type"].is_string()) {
          fail("unsupported_content_type", p + ".type",
               quoted(p + ".type") + " is '" + b["type"].get<std::string>() + "'; only text blocks are accepted here");
        } else {
          wrong_type(p, "a text block {\"type\":\"text\",\"text\":...}");
        }
        return std::nullopt;
      }
      auto t = text_block(b, p);
      if (!t) return std::nullopt;
      if (j > 0) joined += "\n";
      joined += *t;
    }
    return joined;
  }

  json messages() {
    json out = json::array();
    if (const json* s = field("system")) {
      auto text = texts(*s, "system");
      if (!text) return out;
      out.push_back({{"role", "system"}, {"content", *text}});
    }
    const json* ms = field("messages");
    if (ms == nullptr) {
      fail("missing_required_parameter", "messages", "'messages' is required: an array of {role, content}");
      return out;
    }
    if (!ms->is_array()) {
      wrong_type("messages", "an array of {role, content} objects");
      return out;
    }
    if (ms->empty()) {
      fail("invalid_value", "messages", "'messages' must contain at least one message");
      return out;
    }
    for (std::size_t i = 0; i < ms->size() && !failed(); ++i) {
      const json& m = (*ms)[i];
      const std::string at = "messages." + std::to_string(i);
      if (!m.is_object()) {
        wrong_type(at, "an object {role, content}");
        break;
      }
      if (!only_keys(m, at, {"role", "content"})) break;
      auto role = m.find("role");
      if (role == m.end() || !role->is_string()) {
        fail("missing_required_parameter", at + ".role", quoted(at + ".role") + " is required: user or assistant");
        break;
      }
      const std::string r = role->get<std::string>();
      if (r != "user" && r != "assistant") {
        fail("invalid_value", at + ".role", quoted(at + ".role") + " is '" + r + "'; expected user or assistant (system is a top-level field)");
        break;
      }
      auto c = m.find("content");
      if (c == m.end() || c->is_null()) {
        fail("missing_required_parameter", at + ".content", quoted(at + ".content") + " is required");
        break;
      }
      if (c->is_string()) {
        out.push_back({{"role", r}, {"content", *c}});
        continue;
      }
      if (!c->is_array()) {
        wrong_type(at + ".content", "a string or an array of content blocks");
        break;
      }
      std::string text, thinking;
      bool has_text = false;
      json calls = json::array();
      json results = json::array();  // tool messages
      for (std::size_t j = 0; j < c->size() && !failed(); ++j) {
        const json& b = (*c)[j];
        const std::string p = at + ".content." + std::to_string(j);
        if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) {
          wrong_type(p, "a content block {\"type\", ...}");
          break;
        }
        const std::string type = b["type"].get<std::string>();
        if (type == "text") {
          auto t = text_block(b, p);
          if (!t) break;
          if (has_text) text += "\n";
          text += *t;
          has_text = true;
        } else if (type == "tool_use") {
          if (r != "assistant") {
            fail("invalid_value", p + ".type", quoted(p) + ": only assistant messages carry tool_use blocks");
            break;
          }
          if (!only_keys(b, p, {"type", "id", "name", "input", "cache_control"})) break;
          if (!b.contains("id") || !b["id"].is_string() || b["id"].get_ref<const std::string&>().empty()) {
            fail("missing_required_parameter", p + ".id", quoted(p + ".id") + " is required (a string)");
            break;
          }
          if (!b.contains("name") || !b["name"].is_string()) {
            fail("missing_required_parameter", p + ".name", quoted(p + ".name") + " is required (a string)");
            break;
          }
          if (!b.contains("input") || !b["input"].is_object()) {
            fail("invalid_type", p + ".input", quoted(p + ".input") + " must be an object");
            break;
          }
          calls.push_back({{"id", b["id"]}, {"type", "function"},
                           {"function", {{"name", b["name"]}, {"arguments", b["input"].dump()}}}});
        } else if (type == "tool_result") {
          if (r != "user") {
            fail("invalid_value", p + ".type", quoted(p) + ": only user messages carry tool_result blocks");
            break;
          }
          if (!only_keys(b, p, {"type", "tool_use_id", "content", "is_error", "cache_control"})) break;
          if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string()) {
            fail("missing_required_parameter", p + ".tool_use_id", quoted(p + ".tool_use_id") + " is required (a string)");
            break;
          }
          if (b.contains("is_error") && !b["is_error"].is_null() && !b["is_error"].is_boolean()) {
            wrong_type(p + ".is_error", "true or false");
            break;
          }
          std::string content;
          if (b.contains("content") && !b["content"].is_null()) {
            auto t = texts(b["content"], p + ".content");
            if (!t) break;
            content = *t;
          }
          const std::string id = b["tool_use_id"].get<std::string>();
          bool known = false;  // it must answer a tool_use of an earlier assistant turn
          for (const auto& earlier : out)
            if (earlier.contains("tool_calls"))
              for (const auto& call : earlier["tool_calls"]) known = known || call["id"] == id;
          if (!known) {
            fail("invalid_value", p + ".tool_use_id",
                 quoted(p + ".tool_use_id") + " is '" + id + "', which no earlier assistant tool_use block has");
            break;
          }
          results.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", content}});
        } else if (type == "thinking") {
          if (r != "assistant") {
            fail("invalid_value", p + ".type", quoted(p) + ": only assistant messages carry thinking blocks");
            break;
          }
          if (!only_keys(b, p, {"type", "thinking", "signature"})) break;
          if (!b.contains("thinking") || !b["thinking"].is_string()) {
            fail("missing_required_parameter", p + ".thinking", quoted(p + ".thinking") + " is required (a string)");
            break;
          }
          thinking += b["thinking"].get<std::string>();
        } else {
          fail("unsupported_content_type", p + ".type",
               quoted(p + ".type") + " is '" + type +
                   "'; memra-host serves text models and accepts text, tool_use, tool_result and thinking blocks");
        }
      }
      if (failed()) break;
      for (auto& t : results) out.push_back(std::move(t));
      if (r == "assistant") {
        json a = {{"role", "assistant"}, {"content", has_text || calls.empty() ? json(text) : json(nullptr)}};
        if (!calls.empty()) a["tool_calls"] = std::move(calls);
        if (!thinking.empty()) a["reasoning_content"] = thinking;
        out.push_back(std::move(a));
      } else if (has_text || results.empty()) {
        out.push_back({{"role", "user"}, {"content", text}});
      }
    }
    return out;
  }

  json tools() {
    json out = json::array();
    const json* v = field("tools");
    if (v == nullptr || failed()) return out;
    if (!v->is_array()) {
      wrong_type("tools", "an array of {\"name\",\"description\",\"input_schema\"}");
      return out;
    }
    for (std::size_t i = 0; i < v->size() && !failed(); ++i) {
      const json& t = (*v)[i];
      const std::string at = "tools." + std::to_string(i);
      if (!t.is_object()) {
        wrong_type(at, "an object {\"name\",\"description\",\"input_schema\"}");
        break;
      }
      if (auto type = t.find("type"); type != t.end() && !type->is_null() && *type != "custom") {
        fail("unsupported_parameter", at + ".type",
             quoted(at + ".type") + " must be \"custom\" or absent (client tools); server tools are not available in memra-host");
        break;
      }
      if (!only_keys(t, at, {"type", "name", "description", "input_schema", "cache_control"})) break;
      auto schema = t.find("input_schema");
      if (schema == t.end() || schema->is_null()) {
        fail("missing_required_parameter", at + ".input_schema", quoted(at + ".input_schema") + " is required (a JSON Schema object)");
        break;
      }
      // In chat's order (templates render the tools as JSON text).
      json fn = {{"name", t.value("name", json())}};
      if (t.contains("description")) fn["description"] = t["description"];
      fn["parameters"] = *schema;
      out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    return out;
  }

  // tool_choice {type: auto | any | tool | none, name?, disable_parallel_tool_use?} into chat.
  void tool_choice(json& chat) {
    const json* v = field("tool_choice");
    if (v == nullptr || failed()) return;
    if (!v->is_object()) return wrong_type("tool_choice", "an object {\"type\": auto, any, tool or none}");
    if (!only_keys(*v, "tool_choice", {"type", "name", "disable_parallel_tool_use"})) return;
    const json type = v->value("type", json());
    if (type == "auto") {
      chat["tool_choice"] = "auto";
    } else if (type == "any") {
      chat["tool_choice"] = "required";
    } else if (type == "none") {
      chat["tool_choice"] = "none";
    } else if (type == "tool") {
      if (!v->contains("name") || !(*v)["name"].is_string()) {
        return fail("missing_required_parameter", "tool_choice.name", "'tool_choice.name' is required for type tool");
      }
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*v)["name"]}}}};
    } else {
      return fail("invalid_value", "tool_choice.type", "'tool_choice.type' must be auto, any, tool or none");
    }
    if (auto d = v->find("disable_parallel_tool_use"); d != v->end() && !d->is_null()) {
      if (!d->is_boolean()) return wrong_type("tool_choice.disable_parallel_tool_use", "true or false");
      chat["parallel_tool_calls"] = !d->get<bool>();
    }
  }

  // thinking {type: enabled | disabled, budget_tokens}: the template's thinking switch.
  void thinking(json& chat) {
    const json* v = field("thinking");
    if (v == nullptr || failed()) return;
    if (!v->is_object()) return wrong_type("thinking", "an object {\"type\": enabled or disabled}");
    if (!only_keys(*v, "thinking", {"type", "budget_tokens"})) return;
    const json type = v->value("type", json());
    if (type == "disabled") {
      chat["chat_template_kwargs"] = {{"enable_thinking", false}};
    } else if (type == "enabled") {
      if (auto b = v->find("budget_tokens"); b != v->end() && !b->is_null()) {
        // As Anthropic bounds it: at least 1024 and below max_tokens; the close marker is forced
        // after that many thinking tokens (chat's thinking_token_budget).
        const json* max = field("max_tokens");
        if (!b->is_number_integer() || b->get<std::int64_t>() < 1024) {
          return fail("invalid_value", "thinking.budget_tokens", "'thinking.budget_tokens' must be an integer >= 1024");
        }
        if (max != nullptr && max->is_number_integer() && b->get<std::int64_t>() >= max->get<std::int64_t>()) {
          return fail("invalid_value", "thinking.budget_tokens", "'thinking.budget_tokens' must be less than max_tokens");
        }
        chat["thinking_token_budget"] = *b;
      }
      chat["chat_template_kwargs"] = {{"enable_thinking", true}};
    } else {
      fail("invalid_value", "thinking.type", "'thinking.type' must be enabled or disabled");
    }
  }
};

// The chat validator's param, in the Messages request's terms.
std::string messages_param(const std::string& chat) {
  auto starts = [&](const char* p) { return chat.rfind(p, 0) == 0; };
  if (starts("messages")) return "messages";  // its indices are the chat's
  if (starts("stop")) return "stop_sequences";
  if (starts("tools[")) {
    std::string p = chat;
    p.replace(0, 6, "tools.");
    if (auto close = p.find(']'); close != std::string::npos) p.erase(close, 1);
    if (auto fn = p.find(".function.parameters"); fn != std::string::npos) p.replace(fn, 20, ".input_schema");
    if (auto fn = p.find(".function"); fn != std::string::npos) p.erase(fn, 9);
    return p;
  }
  if (starts("max_completion_tokens")) return "max_tokens";
  if (starts("tool_choice") || starts("parallel_tool_calls")) return "tool_choice";
  if (starts("chat_template_kwargs")) return "thinking";
  return chat;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> messages_field_policies() {
  return policy_table(fields());
}

Parsed<MessagesRequest> parse_messages_body(std::string_view body) {
  Parsed<MessagesRequest> out;
  auto doc = parse_json_body(body, out.error);
  if (!doc) return out;
  Translator t{{*doc}};
  MessagesRequest r;
  json chat = json::object();
  if (auto m = doc->find("model"); m != doc->end()) chat["model"] = *m;
  t.check_fields();
  if (!t.failed() && t.field("max_tokens") == nullptr) {
    t.fail("missing_required_parameter", "max_tokens", "'max_tokens' is required (an integer >= 1)");
  }
  if (!t.failed()) chat["messages"] = t.messages();
  if (const json* v = t.field("stream"); v && !t.failed()) {
    if (!v->is_boolean()) t.wrong_type("stream", "true or false");
    else r.stream = v->get<bool>();
  }
  if (const json* v = t.field("temperature"); v && !t.failed()) {
    // Anthropic's range is 0-1 (the chat check allows up to 2).
    if (v->is_number() && (v->get<double>() < 0.0 || v->get<double>() > 1.0)) {
      t.fail("invalid_value", "temperature", "'temperature' must be between 0 and 1, got " + v->dump());
    }
    chat["temperature"] = *v;
  }
  for (const char* same : {"top_p", "top_k", "max_tokens", "metadata", "service_tier"}) {
    if (const json* v = t.field(same)) chat[same] = *v;
  }
  if (const json* v = t.field("metadata"); v && v->is_object()) {
    if (!t.only_keys(*v, "metadata", {"user_id"})) {
    } else if (v->contains("user_id") && !(*v)["user_id"].is_null()) {
      if (!(*v)["user_id"].is_string()) t.wrong_type("metadata.user_id", "a string");
      else chat["user"] = (*v)["user_id"];
    }
    chat.erase("metadata");
  }
  if (const json* v = t.field("stop_sequences"); v && !t.failed()) {
    if (!v->is_array()) t.wrong_type("stop_sequences", "an array of strings");
    else chat["stop"] = *v;
  }
  if (json tools = t.tools(); !tools.empty()) chat["tools"] = std::move(tools);
  t.tool_choice(chat);
  t.thinking(chat);
  if (t.failed()) {
    out.error = std::move(t.error);
    return out;
  }
  Validation v = validate_completion_json(CompletionKind::chat, chat);
  if (v.error) {
    if (v.error->param) {
      const std::string from = *v.error->param, to = messages_param(from);
      if (from != to) {
        std::string& msg = v.error->message;
        for (std::size_t at = msg.find("'" + from); at != std::string::npos; at = msg.find("'" + from, at + to.size()))
          msg.replace(at + 1, from.size(), to);
      }
      v.error->param = to;
    }
    out.error = std::move(v.error);
    return out;
  }
  r.chat = std::move(*v.request);
  out.value = std::move(r);
  return out;
}

}  // namespace memra::server
