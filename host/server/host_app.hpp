// memra-host as a Poco ServerApplication: options, start-up (keys, registry,
// plugins, models), serving, and the SIGTERM/SIGINT drain.
//
// Exit codes (docs/FLAGS.md): 0 ok; 64 bad flag or environment value; 66 a
// model cannot be loaded; 69 the backend asked for is not in this build; 70
// internal error; 71 cannot listen on the address; 75 the drain was cut short
// (timeout or second signal); 77 the registry gate refused a model; 78 bad API
// key file or registry.
#pragma once

#include <Poco/Util/ServerApplication.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "host/server/host_options.hpp"

namespace Poco::Net {
class Context;
}

namespace memra::server {

class HostApp : public Poco::Util::ServerApplication {
 public:
  HostApp() = default;
  // init + run + uninitialize, reporting a malformed command line as a usage
  // error (exit 64) with a pointer to --help instead of Poco's bare message.
  int run_main(int argc, char** argv);

 protected:
  void defineOptions(Poco::Util::OptionSet& options) override;
  void handleOption(const std::string& name, const std::string& value) override;
  int main(const std::vector<std::string>& args) override;

 private:
  void print_help() const;
  int serve(const HostOptions& options, int plugins_loaded, class KeyRing* keys, class ModelSet& models,
            bool default_model,
            std::shared_ptr<Poco::Net::Context> tls);

  std::vector<std::pair<std::string, std::string>> flags_;  // in command-line order
  bool help_ = false;
  bool version_ = false;
};

}  // namespace memra::server
