// Internal: loading and validating one plugin file (load → resolve → query →
// check descriptor → duplicate check → init → check tables).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/plugin_host/plugin_record.hpp"

namespace memra::plugins::detail {

// The kind a file name promises: libmemra-family-<x>.so / libmemra-quant-<x>.so; nullopt otherwise.
std::optional<PluginKind> kind_from_file_name(std::string_view file_name);

// Returns the file that already registered `name`, if any.
using RegisteredLookup = std::function<std::optional<std::filesystem::path>(std::string_view name)>;

// Either a registered record or the one-line refusal reason (without the file).
struct LoadOutcome {
  std::shared_ptr<PluginRecord> record;
  std::string refusal;
};

LoadOutcome load_plugin_file(const std::filesystem::path& file, std::shared_ptr<const HostEnvironment> env,
                             const RegisteredLookup& registered);

}  // namespace memra::plugins::detail
