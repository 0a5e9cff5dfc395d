// GET /health, /ready, /v1/models, /metrics.
#include <nlohmann/json.hpp>
#include <sstream>

#include "host/server/admission.hpp"
#include "host/server/router.hpp"
#include "host/server/served_model.hpp"

namespace memra::server {
namespace {

using nlohmann::json;

Reply health(const Router&, RequestContext&, const Poco::Net::HTTPRequest&, const std::string&) {
  return json_reply(200, R"({"status":"ok"})");
}

// Ready: every model is loaded and its scheduler runs.
Reply ready(const Router& router, RequestContext&, const Poco::Net::HTTPRequest&, const std::string&) {
  const ModelSet* models = router.config().models;
  if (models == nullptr || models->empty() || !router.config().models_ready) {
    json body = json::parse(error_body(errors::not_ready("model_not_loaded", "no model is loaded yet")));
    body["status"] = "not_ready";
    return json_reply(503, body.dump());
  }
  json list = json::array();
  for (const auto& m : models->all()) list.push_back(m->alias);
  return json_reply(200, json{{"status", "ready"}, {"models", list}}.dump());
}

// The memra fields: the context and caches the memory plan gave (docs/SERVING.md, "Memory plan").
json memory_object(const ServedModel& m) {
  const engine::Engine& e = *m.engine;
  json o = {{"context", e.max_context()},
            {"kv_cache_tokens", static_cast<std::int64_t>(e.kv_blocks().num_blocks()) * e.block_size()},
            {"kv_cache_bytes", e.kv_cache_bytes()},
            {"recurrent_state_bytes", e.recurrent_state_bytes()}};
  if (const engine::MemoryPlan* p = e.memory_plan()) {
    o["device"] = p->input.device;
    o["device_memory_bytes"] = p->input.total;
    o["memory_fraction"] = p->input.fraction;
    o["weights_bytes"] = p->input.weights;
    o["workspace_bytes"] = p->input.workspace;
    o["budget_bytes"] = p->budget;
    o["context_reduced"] = p->context_reduced;
    o["plan"] = p->lines;
  }
  return o;
}

json model_object(const ServedModel& m) {
  return {{"id", m.alias},          {"object", "model"},          {"created", m.created},
          {"owned_by", "memra"},    {"max_model_len", m.max_context()}, {"memra", memory_object(m)}};
}

Reply models(const Router& router, RequestContext&, const Poco::Net::HTTPRequest&, const std::string&) {
  json data = json::array();
  if (const ModelSet* models = router.config().models)
    for (const auto& m : models->all()) data.push_back(model_object(*m));
  return json_reply(200, json{{"object", "list"}, {"data", data}}.dump());
}

// GET /v1/models/{id} (the clients' models.retrieve).
Reply model(const Router& router, RequestContext& ctx, const Poco::Net::HTTPRequest&, const std::string&) {
  const ModelSet* models = router.config().models;
  const ServedModel* m = models ? models->find(ctx.path_param) : nullptr;
  if (m == nullptr) return error_reply(errors::model_not_found(ctx.path_param));
  return json_reply(200, model_object(*m).dump());
}

// Gauges that mirror live state are refreshed at scrape time.
void refresh(const Router& router) {
  Metrics& metrics = router.metrics();
  if (const ModelSet* models = router.config().models) {
    Metrics::ProtocolGauges totals;
    for (const auto& m : models->all()) {
      const engine::SchedulerStats s = m->scheduler->stats();
      totals.running += s.running;
      totals.waiting += s.waiting;
      totals.kv_blocks_used += s.kv_blocks_total - s.kv_blocks_free;
      totals.kv_blocks_total += s.kv_blocks_total;
      Metrics::SchedulerGauges g;
      g.running = s.running;
      g.waiting = s.waiting;
      g.kv_blocks_total = s.kv_blocks_total;
      g.kv_blocks_free = s.kv_blocks_free;
      g.prefix_cache_blocks = s.prefix_cache_blocks;
      g.prefix_hit_tokens = s.prefix_hit_tokens;
      g.prompt_tokens = s.prompt_tokens;
      g.spec_drafted = s.spec_drafted;
      g.spec_accepted = s.spec_accepted;
      metrics.set_scheduler(m->alias, g);
      const engine::Engine& e = *m->engine;
      Metrics::MemoryGauges mg;
      mg.kv_cache = static_cast<double>(e.kv_cache_bytes());
      mg.recurrent_state = static_cast<double>(e.recurrent_state_bytes());
      mg.context = e.max_context();
      mg.kv_cache_tokens = static_cast<std::int64_t>(e.kv_blocks().num_blocks()) * e.block_size();
      if (const engine::MemoryPlan* p = e.memory_plan()) {
        mg.device_total = static_cast<double>(p->input.total);
        mg.weights = static_cast<double>(p->input.weights);
        mg.workspace = static_cast<double>(p->input.workspace);
        mg.budget = static_cast<double>(p->budget);
      }
      metrics.set_memory(m->alias, mg);
      metrics.set_cache_config(m->alias, e.block_size(), static_cast<std::int64_t>(e.kv_blocks().num_blocks()));
    }
    metrics.set_protocol(totals);
  }
  if (const TenantAdmission* admission = router.config().admission) {
    for (const auto& t : admission->stats()) metrics.set_tenant(t.tenant, t.running, t.waiting, t.kv_tokens);
  }
}

// Prometheus text with only the series a tenant may see: those without a tenant label and
// its own (a tenant's key must not learn the other tenants' names or traffic).
std::string tenant_view(const std::string& text, const std::string& tenant) {
  std::string own = "tenant=\"";
  for (char c : tenant) {
    if (c == '\\' || c == '"') own += '\\';
    own += c;
  }
  own += '"';
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const bool sample = !line.empty() && line[0] != '#';
    if (sample && line.find("tenant=\"") != std::string::npos && line.find(own) == std::string::npos) continue;
    out += line;
    out += '\n';
  }
  return out;
}

Reply metrics(const Router& router, RequestContext& ctx, const Poco::Net::HTTPRequest&, const std::string&) {
  refresh(router);
  Reply reply;
  reply.content_type = "text/plain; version=0.0.4; charset=utf-8";
  reply.body = router.metrics().render();
  if (ctx.key != nullptr && !ctx.key->metrics_all) reply.body = tenant_view(reply.body, ctx.key->tenant);
  return reply;
}

}  // namespace

std::vector<Route> info_routes() {
  return {
      {"/health", "GET", /*open=*/true, /*has_body=*/false, &health},
      {"/ready", "GET", /*open=*/true, /*has_body=*/false, &ready},
      {"/v1/models", "GET", /*open=*/false, /*has_body=*/false, &models},
      {"/v1/models/", "GET", /*open=*/false, /*has_body=*/false, &model, /*anthropic_errors=*/false, /*path_param=*/true},
      {"/metrics", "GET", /*open=*/false, /*has_body=*/false, &metrics},
  };
}

}  // namespace memra::server
