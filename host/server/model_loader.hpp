// Loading the models memra-host serves: open the checkpoint, ask the registry
// whether its (family, quant, drafter, arch) combination may load, then build
// the text model, the engine on the chosen backend and its scheduler.
#pragma once

#include <Poco/Logger.h>

#include <filesystem>
#include <atomic>
#include <memory>
#include <string>

#include "core/common/result.hpp"
#include "host/server/host_options.hpp"
#include "host/server/served_model.hpp"

namespace memra::plugins {
class PluginHost;
}
namespace memra::registry {
class Registry;
}

namespace memra::server {

// The alias of the embedded default model and where it lives relative to the binary.
inline constexpr const char* kDefaultModelAlias = "memra-demo";
// <dir of the running executable>/../share/memra/default_model.
std::filesystem::path default_model_dir();

// Why a model did not load; HostApp maps each to an exit code (docs/FLAGS.md).
enum class LoadFailure {
  backend_unavailable,  // --backend cuda in a build without the CUDA backend (exit 69)
  bad_model,            // missing, unreadable or unsupported checkpoint (exit 66)
  gate_refused,         // registry verdict generic without --allow-generic, or rejected (exit 77)
};

struct LoadError {
  LoadFailure kind = LoadFailure::bad_model;
  std::string message;
};

struct LoadOutcome {
  std::unique_ptr<ServedModel> model;  // set on success
  LoadError error;
};

// `stop`, when set during a first-load repack, cancels it (the repack removes what it wrote).
LoadOutcome load_served_model(const ModelSpec& spec, const HostOptions& options, const plugins::PluginHost& plugins,
                              const registry::Registry& registry, Poco::Logger& log, const std::atomic<bool>* stop = nullptr);

}  // namespace memra::server
