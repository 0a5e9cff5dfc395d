// A random-weight model in memory, shaped by a Hugging Face config.json text and a
// family plugin's plan: every tensor the plan lists, matrices in one weight scheme
// (random values with sane scales), norms = 1. Timing needs the shapes and bytes of
// a real model, not its values; nothing is written to disk.
#pragma once

#include <memory>
#include <string>

#include "core/common/result.hpp"
#include "host/engine/model_source.hpp"
#include "core/plugin_host/plugin_host.hpp"

namespace memra::bench {

// scheme: "bf16", "f16", "f32", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "iq4_xs".
Result<std::unique_ptr<engine::ModelSource>> random_model(const std::string& hf_config_json, const std::string& scheme,
                                                          const plugins::PluginHost& plugins, uint64_t seed);

}  // namespace memra::bench
