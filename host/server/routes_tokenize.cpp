// POST /tokenize and /detokenize: the model's tokenizer (and chat template) over
// HTTP, so clients can count tokens exactly as the server will.
#include "host/server/openai_format.hpp"
#include "host/server/prompt_builder.hpp"
#include "host/server/request_validation.hpp"
#include "host/server/router.hpp"
#include "host/server/served_model.hpp"

namespace memra::server {
namespace {

// The model named by a request, or the error reply.
ServedModel* find_model(const Router& router, const std::string& alias, Reply& error) {
  ModelSet* models = router.config().models;
  if (models == nullptr || models->empty()) {
    error = error_reply(errors::model_not_loaded());
    return nullptr;
  }
  ServedModel* model = models->find(alias);
  if (model == nullptr) error = error_reply(errors::model_not_found(alias));
  return model;
}

Reply tokenize(const Router& router, RequestContext&, const Poco::Net::HTTPRequest&, const std::string& body) {
  auto parsed = parse_tokenize_body(body);
  if (parsed.error) return error_reply(*parsed.error);
  const TokenizeRequest& req = *parsed.value;
  Reply error;
  ServedModel* model = find_model(router, req.model, error);
  if (model == nullptr) return error;
  const auto& tok = *model->text.tokenizer;
  std::vector<std::int32_t> ids;
  if (req.prompt) {
    ids = tok.encode(*req.prompt, req.add_special_tokens.value_or(true));
  } else {
    RenderedChat chat = render_chat(*model, req.messages, req.add_generation_prompt);
    if (chat.error) return error_reply(*chat.error);
    ids = tok.encode(chat.text, req.add_special_tokens.value_or(false));
  }
  return json_reply(200, tokenize_body(ids, model->max_context()));
}

Reply detokenize(const Router& router, RequestContext&, const Poco::Net::HTTPRequest&, const std::string& body) {
  auto parsed = parse_detokenize_body(body);
  if (parsed.error) return error_reply(*parsed.error);
  const DetokenizeRequest& req = *parsed.value;
  Reply error;
  ServedModel* model = find_model(router, req.model, error);
  if (model == nullptr) return error;
  std::vector<std::int32_t> ids;
  ids.reserve(req.tokens.size());
  for (std::int64_t id : req.tokens) {
    if (id < 0 || id >= model->vocab_size()) {
      return error_reply(errors::invalid_request("invalid_value",
                                                 "token id " + std::to_string(id) + " is outside the vocabulary of '" +
                                                     model->alias + "' (0 to " +
                                                     std::to_string(model->vocab_size() - 1) + ")",
                                                 "tokens"));
    }
    ids.push_back(static_cast<std::int32_t>(id));
  }
  const std::string text =
      model->text.tokenizer->decode(ids, {.skip_special_tokens = false, .clean_up_tokenization_spaces = {}});
  return json_reply(200, detokenize_body(text));
}

}  // namespace

std::vector<Route> tokenize_routes() {
  return {
      {"/tokenize", "POST", /*open=*/false, /*has_body=*/true, &tokenize},
      {"/detokenize", "POST", /*open=*/false, /*has_body=*/true, &detokenize},
  };
}

}  // namespace memra::server
