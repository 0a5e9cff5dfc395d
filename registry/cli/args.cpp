#include "registry/cli/args.hpp"

#include <algorithm>

namespace memra::registry::cli {
namespace {

const FlagSpec* find_flag(const CommandSpec& spec, const std::string& name) {
  for (const auto& f : spec.flags)
    if (f.name == name) return &f;
  return nullptr;
}

Error usage(const CommandSpec& spec, const std::string& what) {
  return make_error(ErrorCode::invalid_argument,
                    "memra-registry " + spec.name + ": " + what + "\n" + usage_line(spec) +
                        "\nRun 'memra-registry " + spec.name + " --help' for details.");
}

}  // namespace

Result<Parsed> parse(const CommandSpec& spec, const std::vector<std::string>& args) {
  Parsed out;
  bool only_positionals = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (only_positionals || a.size() < 2 || a[0] != '-') {
      out.positionals.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positionals = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      out.help = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) return usage(spec, "unknown option '" + a + "'");
    std::string name = a.substr(2);
    std::string value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    const FlagSpec* flag = find_flag(spec, name);
    if (!flag) return usage(spec, "unknown flag '--" + name + "'");
    if (flag->value_name.empty()) {
      if (inline_value) return usage(spec, "flag '--" + name + "' takes no value");
      out.switches.insert(name);
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) return usage(spec, "flag '--" + name + "' needs a value (" + flag->value_name + ")");
      value = args[++i];
    }
    if (out.values.count(name)) return usage(spec, "flag '--" + name + "' given twice");
    out.values[name] = value;
  }
  if (out.help) return out;  // --help wins over anything missing
  for (const auto& f : spec.flags)
    if (f.required && !out.has(f.name)) return usage(spec, "missing required flag '--" + f.name + "'");
  if (out.positionals.size() < spec.positionals.size())
    return usage(spec, "missing argument <" + spec.positionals[out.positionals.size()] + ">");
  if (out.positionals.size() > spec.positionals.size())
    return usage(spec, "unexpected argument '" + out.positionals[spec.positionals.size()] + "'");
  return out;
}

std::string usage_line(const CommandSpec& spec) {
  std::string line = "Usage: memra-registry " + spec.name;
  for (const auto& p : spec.positionals) line += " <" + p + ">";
  for (const auto& f : spec.flags) {
    std::string flag = "--" + f.name + (f.value_name.empty() ? "" : " " + f.value_name);
    line += f.required ? " " + flag : " [" + flag + "]";
  }
  return line;
}

std::string help_text(const CommandSpec& spec) {
  std::string text = usage_line(spec) + "\n\n" + spec.summary + "\n\nOptions:\n";
  std::size_t width = 6;  // "--help"
  for (const auto& f : spec.flags)
    width = std::max(width, 2 + f.name.size() + (f.value_name.empty() ? 0 : 1 + f.value_name.size()));
  auto row = [&](const std::string& left, const std::string& help) {
    text += "  " + left + std::string(width - left.size() + 2, ' ') + help + "\n";
  };
  for (const auto& f : spec.flags)
    row("--" + f.name + (f.value_name.empty() ? "" : " " + f.value_name), f.help);
  row("--help", "show this help");
  if (!spec.details.empty()) text += "\n" + spec.details;
  if (text.back() != '\n') text += "\n";
  return text;
}

}  // namespace memra::registry::cli
