// The inputs of one /v1/embeddings request on a served model's scheduler: submitted in
// a bounded window (so a request of 2048 inputs never floods the scheduler's queue),
// each held to the device gate's --queue-timeout-ms, cancelled when the client goes,
// and collected as their pooled vectors arrive (engine::Scheduler, embedding requests).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "host/server/completion_pipeline.hpp"
#include "host/server/served_model.hpp"

namespace memra::server {

struct EmbeddingRunSpec {
  std::vector<std::vector<std::int32_t>> inputs;  // token ids, each non-empty and inside the context
  std::int64_t priority = 0;                      // the tenant's
  std::chrono::milliseconds queue_timeout{30000}; // per input, from its submission to its admission
  std::function<bool()> client_gone;              // never null
};

struct EmbeddingRunResult {
  std::vector<std::vector<float>> pooled;  // per input, in order (on success)
  std::optional<Refusal> refusal;          // 4xx/5xx: overloaded, timed out, the client left, the engine failed
};

// Blocks until every input is pooled or the run fails (then nothing of it keeps running).
EmbeddingRunResult run_embeddings(ServedModel& model, const EmbeddingRunSpec& spec, Metrics& metrics, const std::string& tenant);

}  // namespace memra::server
