// memra-registry's subcommands: their specs (flags, help) and handlers.
#pragma once

#include <string>
#include <vector>

#include "registry/cli/args.hpp"

namespace memra::registry::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;     // the registry or a file failed
inline constexpr int kExitUsage = 2;     // unknown command/flag, missing or invalid argument
inline constexpr int kExitGeneric = 3;   // check: generic
inline constexpr int kExitRejected = 4;  // check: rejected

struct Command {
  CommandSpec spec;
  int (*run)(const Parsed& args);
};

const std::vector<Command>& commands();
const Command* find_command(const std::string& name);
// The tool's top-level help.
std::string overview();

}  // namespace memra::registry::cli
