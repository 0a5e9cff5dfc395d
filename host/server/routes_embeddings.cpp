// POST /v1/embeddings (OpenAI's Embeddings API) for embedding models: validate, pick
// the model (one whose checkpoint ships sentence-transformers' pooling), turn each
// input into token ids, check them against the model, admit the request for its
// tenant, run the inputs through the model's scheduler and answer with the vectors
// (cut to `dimensions` and renormalised where the model normalises).
#include <algorithm>
#include <optional>

#include "host/engine/embedding_vector.hpp"
#include "host/server/embedding_run.hpp"
#include "host/server/embeddings_format.hpp"
#include "host/server/embeddings_request.hpp"
#include "host/server/router.hpp"

namespace memra::server {
namespace {

// Each input's token ids (texts through the model's tokenizer, with its post-processor:
// Qwen3-Embedding's appends the end-of-text token it pools), or the 400.
std::optional<ApiError> input_tokens(const ServedModel& model, const EmbeddingsRequest& req,
                                     std::vector<std::vector<std::int32_t>>& out) {
  for (std::size_t i = 0; i < req.inputs.size(); ++i) {
    const PromptInput& in = req.inputs[i];
    const std::string at = req.inputs.size() == 1 ? "input" : "input[" + std::to_string(i) + "]";
    const auto context = static_cast<std::size_t>(std::max<std::int64_t>(model.max_context(), 0));
    std::optional<std::vector<std::int32_t>> encoded =
        in.is_tokens ? std::optional(in.tokens) : model.text.tokenizer->encode_at_most(in.text, true, context);
    if (!encoded)  // tokenizing stopped past the context
      return errors::context_length_exceeded("'" + at + "' is more than " + std::to_string(context) +
                                                 " tokens, the context of '" + model.alias +
                                                 "'; shorten it or split it into several inputs",
                                             at);
    std::vector<std::int32_t> ids = std::move(*encoded);
    if (ids.empty()) return errors::invalid_request("invalid_value", "'" + at + "' gives no tokens", at);
    for (std::int32_t id : ids)
      if (id >= model.vocab_size())
        return errors::invalid_request("invalid_value",
                                       "'" + at + "' holds token id " + std::to_string(id) + ", outside the vocabulary of '" +
                                           model.alias + "' (0 to " + std::to_string(model.vocab_size() - 1) + ")",
                                       at);
    if (static_cast<std::int64_t>(ids.size()) > model.max_context())
      return errors::context_length_exceeded("'" + at + "' is " + std::to_string(ids.size()) + " tokens, more than the " +
                                                 std::to_string(model.max_context()) + "-token context of '" + model.alias +
                                                 "'; shorten it or split it into several inputs",
                                             at);
    out.push_back(std::move(ids));
  }
  return std::nullopt;
}

Reply embeddings(const Router& router, RequestContext& ctx, const Poco::Net::HTTPRequest&, const std::string& body) {
  auto parsed = parse_embeddings_body(body);
  if (parsed.error) return error_reply(*parsed.error);
  const EmbeddingsRequest& req = *parsed.value;
  ModelSet* models = router.config().models;
  if (models == nullptr || models->empty()) return error_reply(errors::model_not_loaded());
  ServedModel* model = models->find(req.model);
  if (model == nullptr) return error_reply(errors::model_not_found(req.model));
  if (!model->embedding)
    return error_reply(errors::invalid_request(
        "model_not_embedding",
        "'" + model->alias + "' is not an embedding model (its checkpoint has no sentence-transformers modules.json with a "
                             "Pooling module); /v1/embeddings serves embedding models such as Qwen3-Embedding, and "
                             "'" + model->alias + "' is served by /v1/completions and /v1/chat/completions",
        std::string("model")));
  const std::int64_t width = model->engine->hidden_width();
  if (req.dimensions && *req.dimensions > width)
    return error_reply(errors::invalid_request("invalid_value",
                                               "'dimensions' is " + std::to_string(*req.dimensions) + "; '" + model->alias +
                                                   "' makes vectors of at most " + std::to_string(width) + " dimensions",
                                               std::string("dimensions")));

  EmbeddingRunSpec spec;
  if (auto bad = input_tokens(*model, req, spec.inputs)) return error_reply(*bad);
  std::int64_t tokens = 0;
  for (const auto& ids : spec.inputs) tokens += static_cast<std::int64_t>(ids.size());

  // The tenant's KV budget holds every input's prompt at once (the worst case).
  TenantAdmission::Ticket ticket;
  if (std::optional<Refusal> no = admit_tenant(router, ctx, model->alias, tokens, ticket)) return refusal_reply(*no);
  if (ctx.key != nullptr) spec.priority = ctx.key->limits.priority;
  spec.queue_timeout = std::chrono::milliseconds(router.config().queue_timeout_ms);
  spec.client_gone = ctx.client_gone;
  EmbeddingRunResult run = run_embeddings(*model, spec, router.metrics(), ctx.tenant());
  if (run.refusal) return refusal_reply(*run.refusal);

  std::vector<std::vector<float>> vectors;
  vectors.reserve(run.pooled.size());
  for (const auto& pooled : run.pooled)
    vectors.push_back(engine::client_embedding(pooled, req.dimensions.value_or(0), model->embedding->normalize));
  return json_reply(200, embeddings_body(model->alias, vectors, req.base64, tokens));
}

}  // namespace

std::vector<Route> embeddings_routes() {
  return {{"/v1/embeddings", "POST", /*open=*/false, /*has_body=*/true, &embeddings}};
}

}  // namespace memra::server
