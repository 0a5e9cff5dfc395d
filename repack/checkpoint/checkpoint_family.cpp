#include "repack/checkpoint/checkpoint_family.hpp"

namespace memra {

Result<CheckpointFamily> normalize_checkpoint(const RawConfig& raw, const plugins::PluginHost& plugins) {
  auto family = plugins.family_for(raw.architecture, plugins.device_info());
  if (!family) {
    std::string served;
    for (const plugins::PluginInfo& p : plugins.plugins())
      if (p.kind == plugins::PluginKind::family)
        for (const std::string& h : p.handles) served += (served.empty() ? "" : ", ") + h;
    return make_error(ErrorCode::unsupported,
                      "architecture '" + raw.architecture + "' is not supported: " + family.error().message +
                          (served.empty() ? "; no family plugin is installed (see memra-host --list-plugins)"
                                          : "; the installed family plugins serve " + served));
  }
  auto text = family->normalize_config(raw.json);
  if (!text) return text.error();
  auto config = model_config_from_json(*text);
  if (!config)
    return make_error(config.error().code, "family plugin '" + family->info().name +
                                               "' normalised the config into something memra refuses: " + config.error().message);
  if (config->family != family->info().name)
    return make_error(ErrorCode::internal, "family plugin '" + family->info().name + "' wrote family '" + config->family +
                                               "' into the normalised config; it must be its own name");
  return CheckpointFamily{std::move(*family), std::move(*config), raw.format};
}

}  // namespace memra
