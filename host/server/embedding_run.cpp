#include "host/server/embedding_run.hpp"

#include <deque>
#include <memory>

namespace memra::server {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Submitted and not yet ended; more wait for room (the scheduler's queue stays bounded).
constexpr std::size_t kWindow = 64;

struct InFlight {
  std::size_t index = 0;
  std::shared_ptr<engine::SequenceHandle> handle;
  Clock::time_point submitted;
  bool admitted = false;
};

// Cancels whatever is still submitted when the run ends early.
struct Window {
  std::deque<InFlight> items;
  ~Window() {
    for (auto& f : items) f.handle->cancel();
  }
};

EmbeddingRunResult refused(ApiError e, std::optional<std::int64_t> retry = std::nullopt) {
  EmbeddingRunResult r;
  r.refusal = Refusal{std::move(e), retry};
  return r;
}

}  // namespace

EmbeddingRunResult run_embeddings(ServedModel& model, const EmbeddingRunSpec& spec, Metrics& metrics, const std::string& tenant) {
  EmbeddingRunResult out;
  out.pooled.resize(spec.inputs.size());
  Window window;
  std::size_t next = 0, done = 0;
  std::int64_t prompt_tokens = 0;
  engine::SequenceUpdate u;
  while (done < spec.inputs.size()) {
    while (next < spec.inputs.size() && window.items.size() < kWindow) {
      engine::SequenceRequest req;
      req.prompt = spec.inputs[next];
      req.embedding = model.embedding->pooling;
      req.priority = spec.priority;
      auto h = model.scheduler->submit(std::move(req));
      if (!h && h.error().code == ErrorCode::conflict && !window.items.empty()) break;  // room comes as these end
      if (!h && h.error().code == ErrorCode::conflict) {
        metrics.add_rejection(tenant, "device_full");
        return refused(errors::server_overloaded("the scheduler's queue for '" + model.alias + "' is full: " + h.error().message), 1);
      }
      if (!h) return refused(errors::invalid_request("invalid_value", h.error().message, std::string("input")));
      window.items.push_back({next++, std::move(*h), Clock::now(), false});
    }
    // Block on the oldest only: one scheduler step serves many inputs at once.
    bool first = true;
    for (auto it = window.items.begin(); it != window.items.end();) {
      it->handle->wait(u, first ? 50ms : 0ms);
      first = false;
      if (u.finish == engine::FinishReason::none) {
        it->admitted = it->admitted || it->handle->wait_admitted(0ms);
        if (!it->admitted && Clock::now() - it->submitted >= spec.queue_timeout) {
          metrics.add_rejection(tenant, "device_queue_timeout");
          return refused(errors::server_overloaded("not admitted by the scheduler of '" + model.alias + "' within " +
                                                   std::to_string(spec.queue_timeout.count()) + " ms (memra-host --queue-timeout-ms): " + model.load_summary()),
                         1);
        }
        ++it;
        continue;
      }
      if (u.finish == engine::FinishReason::aborted) return refused(errors::shutting_down());
      if (u.finish != engine::FinishReason::stop || u.embedding.empty())
        return refused(errors::generation_failed(u.error.empty() ? "the embedding ended without a vector" : u.error));
      prompt_tokens += u.prompt_tokens;
      out.pooled[it->index] = std::move(u.embedding);
      ++done;
      it = window.items.erase(it);
    }
    if (done < spec.inputs.size() && spec.client_gone()) {
      metrics.add_tokens(model.alias, tenant, prompt_tokens, 0, 0);
      return refused(errors::client_closed());
    }
  }
  metrics.add_tokens(model.alias, tenant, prompt_tokens, 0, 0);
  metrics.add_embeddings(model.alias, static_cast<std::int64_t>(spec.inputs.size()));
  return out;
}

}  // namespace memra::server
