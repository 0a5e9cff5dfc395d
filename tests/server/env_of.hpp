// An environment for the option tests: apply_environment reads these variables, and no
// others are set.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "host/server/host_options.hpp"

namespace memra::server::test_support {

inline EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace memra::server::test_support
