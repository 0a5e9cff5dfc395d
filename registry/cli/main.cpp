// memra-registry: inspect and edit the memra registry (checkpoints, repacks, combos).
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "registry/cli/commands.hpp"

using namespace memra::registry::cli;

int main(int argc, char** argv) {
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    // Global options may come before the subcommand; they are handed to it.
    std::vector<std::string> global;
    std::size_t i = 0;
    while (i < args.size() && args[i].rfind("-", 0) == 0) {
      const std::string& a = args[i];
      if (a == "--help" || a == "-h") {
        std::cout << overview();
        return kExitOk;
      }
      if (a == "--db" && i + 1 < args.size()) {
        global.push_back(a);
        global.push_back(args[i + 1]);
        i += 2;
      } else if (a.rfind("--db=", 0) == 0) {
        global.push_back(a);
        ++i;
      } else {
        std::cerr << "memra-registry: unknown option '" << a << "'\n"
                  << "Run 'memra-registry --help' for the commands.\n";
        return kExitUsage;
      }
    }
    if (i >= args.size()) {
      std::cerr << "memra-registry: missing command\n" << overview();
      return kExitUsage;
    }
    std::string name = args[i++];
    if (name == "help") {
      if (i < args.size()) {
        if (const Command* c = find_command(args[i])) {
          std::cout << help_text(c->spec);
          return kExitOk;
        }
      }
      std::cout << overview();
      return kExitOk;
    }
    const Command* command = find_command(name);
    if (!command) {
      std::cerr << "memra-registry: unknown command '" << name << "'\n"
                << "Run 'memra-registry --help' for the commands.\n";
      return kExitUsage;
    }
    std::vector<std::string> rest(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
    rest.insert(rest.end(), global.begin(), global.end());
    auto parsed = parse(command->spec, rest);
    if (!parsed.ok()) {
      std::cerr << parsed.error().message << "\n";
      return kExitUsage;
    }
    if (parsed->help) {
      std::cout << help_text(command->spec);
      return kExitOk;
    }
    return command->run(*parsed);
  } catch (const std::exception& e) {
    std::cerr << "memra-registry: internal error: " << e.what() << "\n";
    return kExitError;
  }
}
