#include "host/server/openai_format.hpp"

#include <nlohmann/json.hpp>
#include <random>

namespace memra::server {
namespace {

using ojson = nlohmann::ordered_json;

std::string dump(const ojson& j) {
  // Generated text can hold bytes a byte-level model emitted that are not UTF-8.
  return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

std::string event(const ojson& j) { return "data: " + dump(j) + "\n\n"; }

// The text of one token on its own (special tokens spelled out), and its bytes.
std::string token_string(const ResponseMeta& meta, std::int32_t id) {
  if (meta.tokenizer == nullptr) return {};
  const std::int32_t ids[] = {id};
  return meta.tokenizer->decode(ids, {.skip_special_tokens = false, .clean_up_tokenization_spaces = false});
}

// The token's raw bytes: a byte-level token that is part of a character has its own
// byte(s) here, not U+FFFD's, so clients can join the bytes of consecutive tokens.
std::string token_bytes(const ResponseMeta& meta, std::int32_t id) {
  if (meta.tokenizer == nullptr) return {};
  const std::int32_t ids[] = {id};
  return meta.tokenizer->decode_bytes(ids, {.skip_special_tokens = false, .clean_up_tokenization_spaces = false});
}

ojson bytes_of(const std::string& s) {
  ojson out = ojson::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

ojson chat_logprob_entry(const ResponseMeta& meta, std::int32_t id, float logprob) {
  return ojson{{"token", token_string(meta, id)}, {"logprob", logprob}, {"bytes", bytes_of(token_bytes(meta, id))}};
}

ojson chat_logprobs(const ResponseMeta& meta, const std::vector<TokenRecord>& tokens) {
  ojson content = ojson::array();
  for (const auto& t : tokens) {
    ojson entry = chat_logprob_entry(meta, t.id, t.logprob);
    ojson top = ojson::array();
    for (const auto& alt : t.top) top.push_back(chat_logprob_entry(meta, alt.id, alt.logprob));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return ojson{{"content", std::move(content)}, {"refusal", nullptr}};
}

// The legacy completions shape; `offset` is added to each token's text position.
ojson text_logprobs(const ResponseMeta& meta, const std::vector<TokenRecord>& tokens, std::size_t offset) {
  ojson strings = ojson::array(), logprobs = ojson::array(), top = ojson::array(), offsets = ojson::array();
  for (const auto& t : tokens) {
    strings.push_back(token_string(meta, t.id));
    logprobs.push_back(t.logprob);
    if (meta.top_logprobs > 0) {
      ojson alts = ojson::object();
      for (const auto& alt : t.top) {
        const std::string s = token_string(meta, alt.id);
        if (!alts.contains(s)) alts[s] = alt.logprob;
      }
      top.push_back(std::move(alts));
    } else {
      top.push_back(nullptr);
    }
    offsets.push_back(offset + t.text_start);
  }
  return ojson{{"tokens", std::move(strings)}, {"token_logprobs", std::move(logprobs)},
               {"top_logprobs", std::move(top)}, {"text_offset", std::move(offsets)}};
}

ojson usage_json(const UsageCounts& u) {
  ojson usage{{"prompt_tokens", u.prompt},
              {"completion_tokens", u.completion},
              {"total_tokens", u.prompt + u.completion},
              {"prompt_tokens_details", {{"cached_tokens", u.cached}}}};
  ojson details = ojson::object();
  if (u.reasoning) details["reasoning_tokens"] = u.reasoning_tokens;
  if (u.speculative) {
    details["speculative_drafted_tokens"] = u.drafted;
    details["speculative_accepted_tokens"] = u.accepted;
  }
  if (!details.empty()) usage["completion_tokens_details"] = std::move(details);
  return usage;
}

ojson head(const ResponseMeta& meta, const char* object) {
  return ojson{{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model},
               {"system_fingerprint", meta.fingerprint}};
}

bool is_chat(const ResponseMeta& meta) { return meta.kind == CompletionKind::chat; }

ojson tool_calls_json(const std::vector<ToolCallOut>& calls) {
  ojson list = ojson::array();
  for (const auto& c : calls)
    list.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return list;
}

}  // namespace

std::string completion_body(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices,
                            const UsageCounts& usage) {
  ojson body = head(meta, is_chat(meta) ? "chat.completion" : "text_completion");
  ojson list = ojson::array();
  for (const auto& c : choices) {
    ojson choice = {{"index", c.index}};
    if (is_chat(meta)) {
      ojson message = {{"role", "assistant"}};
      // A turn that only calls tools has no content (null), as OpenAI answers it.
      message["content"] = c.text.empty() && !c.tool_calls.empty() ? ojson(nullptr) : ojson(c.text);
      if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
      if (!c.tool_calls.empty()) message["tool_calls"] = tool_calls_json(c.tool_calls);
      message["refusal"] = nullptr;
      choice["message"] = std::move(message);
      choice["logprobs"] = meta.logprobs ? chat_logprobs(meta, c.tokens) : ojson(nullptr);
    } else {
      choice["text"] = c.prefix + c.text;
      choice["logprobs"] = meta.logprobs ? text_logprobs(meta, c.tokens, c.prefix.size()) : ojson(nullptr);
    }
    choice["finish_reason"] = c.finish_reason;
    list.push_back(std::move(choice));
  }
  body["choices"] = std::move(list);
  body["usage"] = usage_json(usage);
  return dump(body) + "\n";
}

std::string chat_role_event(const ResponseMeta& meta, std::size_t index, bool usage_null) {
  ojson body = head(meta, "chat.completion.chunk");
  body["choices"] = ojson::array({ojson{{"index", index},
                                        {"delta", {{"role", "assistant"}, {"content", ""}}},
                                        {"logprobs", nullptr},
                                        {"finish_reason", nullptr}}});
  if (usage_null) body["usage"] = nullptr;
  return event(body);
}

std::string delta_event(const ResponseMeta& meta, const ChoiceDelta& delta, const std::string& prefix,
                        std::size_t echo_bytes, bool usage_null, const ChatDeltaExtras* extras) {
  std::string out;
  const char* object = is_chat(meta) ? "chat.completion.chunk" : "text_completion";
  auto emit = [&](ojson choice) {
    ojson body = head(meta, object);
    body["choices"] = ojson::array({std::move(choice)});
    if (usage_null) body["usage"] = nullptr;
    out += event(body);
  };
  const bool reasoning = extras != nullptr && !extras->reasoning.empty();
  // A chat event carries text, thinking, or the logprobs of tokens whose text went into
  // a tool call (never an empty content: tokens held back for a call send nothing).
  const bool news = is_chat(meta) ? !delta.text.empty() || reasoning || (meta.logprobs && !delta.tokens.empty())
                                  : !delta.text.empty() || !delta.tokens.empty() || !prefix.empty();
  if (news) {
    ojson choice = {{"index", delta.index}};
    if (is_chat(meta)) {
      ojson d = ojson::object();
      if (reasoning) d["reasoning_content"] = extras->reasoning;
      if (!delta.text.empty()) d["content"] = delta.text;
      choice["delta"] = std::move(d);
      choice["logprobs"] = meta.logprobs ? chat_logprobs(meta, delta.tokens) : ojson(nullptr);
    } else {
      choice["text"] = prefix + delta.text;
      choice["logprobs"] = meta.logprobs ? text_logprobs(meta, delta.tokens, echo_bytes)
                                         : ojson(nullptr);
    }
    choice["finish_reason"] = nullptr;
    emit(std::move(choice));
  }
  if (extras != nullptr) {
    // As OpenAI streams a call: its index, id, type and name first (arguments ""), then
    // its arguments as they are written, each part under the call's index.
    for (const auto& c : extras->tool_calls) {
      if (c.begins)
        emit({{"index", delta.index},
              {"delta", {{"tool_calls", ojson::array({{{"index", c.index}, {"id", c.id}, {"type", "function"},
                                                       {"function", {{"name", c.name}, {"arguments", ""}}}}})}}},
              {"logprobs", nullptr},
              {"finish_reason", nullptr}});
      if (!c.arguments.empty())
        emit({{"index", delta.index},
              {"delta", {{"tool_calls", ojson::array({{{"index", c.index}, {"function", {{"arguments", c.arguments}}}}})}}},
              {"logprobs", nullptr},
              {"finish_reason", nullptr}});
    }
  }
  if (delta.finish_reason) {
    ojson choice = {{"index", delta.index}};
    if (is_chat(meta)) choice["delta"] = ojson::object();
    else choice["text"] = "";
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = *delta.finish_reason;
    emit(std::move(choice));
  }
  return out;
}

std::string usage_event(const ResponseMeta& meta, const UsageCounts& usage) {
  ojson body = head(meta, is_chat(meta) ? "chat.completion.chunk" : "text_completion");
  body["choices"] = ojson::array();
  body["usage"] = usage_json(usage);
  return event(body);
}

std::string error_event(const ApiError& error) { return "data: " + error_body(error) + "\n\n"; }

std::string tokenize_body(const std::vector<std::int32_t>& tokens, std::int64_t max_model_len) {
  return dump(ojson{{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", max_model_len}});
}

std::string detokenize_body(const std::string& text) { return dump(ojson{{"prompt", text}}); }

std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kHex[rng() & 15];
  return id;
}

}  // namespace memra::server
