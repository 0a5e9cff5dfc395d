// A small command-line parser for memra-registry's subcommands:
// "--flag value", "--flag=value", boolean switches, required positionals, --help.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/common/result.hpp"

namespace memra::registry::cli {

struct FlagSpec {
  std::string name;        // without the leading "--"
  std::string value_name;  // empty: a switch that takes no value
  std::string help;
  bool required = false;
};

struct CommandSpec {
  std::string name;
  std::string summary;
  std::vector<std::string> positionals;  // names; each is required
  std::vector<FlagSpec> flags;
  std::string details;  // extra help text (exit codes, examples)
};

struct Parsed {
  std::map<std::string, std::string> values;  // flags with values
  std::set<std::string> switches;             // flags without values that were given
  std::vector<std::string> positionals;
  bool help = false;

  bool has(const std::string& name) const { return values.count(name) || switches.count(name); }
  std::string get(const std::string& name, const std::string& fallback = "") const {
    auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  }
};

// Parses the arguments after the subcommand name. An error is a usage error
// (ErrorCode::invalid_argument) whose message says what was wrong.
Result<Parsed> parse(const CommandSpec& spec, const std::vector<std::string>& args);

// "Usage: memra-registry <name> ..." with every flag and its help.
std::string help_text(const CommandSpec& spec);
std::string usage_line(const CommandSpec& spec);

}  // namespace memra::registry::cli
