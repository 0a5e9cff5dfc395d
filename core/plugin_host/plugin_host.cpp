// PluginHost: search path, discovery, the registry of loaded plugins, selection by score.
#include "core/plugin_host/plugin_host.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <system_error>

#include "core/plugin_host/plugin_loader.hpp"
#include "core/plugin_host/plugin_record.hpp"

namespace memra::plugins {

namespace fs = std::filesystem;

std::string_view to_string(PluginKind kind) { return kind == PluginKind::family ? "family" : "quant"; }

ErrorCode error_code_for(memra_status status) {
  switch (status) {
    case MEMRA_ERR_INVALID_ARGUMENT: return ErrorCode::invalid_argument;
    case MEMRA_ERR_UNSUPPORTED: return ErrorCode::unsupported;
    case MEMRA_ERR_ABI_MISMATCH: return ErrorCode::unsupported;
    case MEMRA_ERR_NOT_FOUND: return ErrorCode::not_found;
    case MEMRA_ERR_IO: return ErrorCode::io;
    case MEMRA_ERR_CANCELLED: return ErrorCode::conflict;
    default: return ErrorCode::internal;
  }
}

namespace {

enum class DirOrigin { explicit_dir, env_path, install_dir };

struct SearchDir {
  fs::path path;
  DirOrigin origin;
};

fs::path normalised(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : c;
}

}  // namespace

struct PluginHost::Impl {
  PluginHostOptions options;
  std::shared_ptr<const HostEnvironment> env;
  std::vector<std::shared_ptr<detail::PluginRecord>> records;  // registration order
  std::vector<Refusal> refusals;
  std::set<fs::path> tried;  // canonical files already tried (a dir listed twice, symlinks)

  std::vector<SearchDir> dirs() const {
    std::vector<SearchDir> out;
    std::set<fs::path> seen;
    auto add = [&](const fs::path& p, DirOrigin origin) {
      if (p.empty()) return;
      if (seen.insert(normalised(p)).second) out.push_back({p, origin});
    };
    for (const fs::path& p : options.plugin_dirs) add(p, DirOrigin::explicit_dir);
    if (options.use_env_path) {
      if (const char* env_path = std::getenv("MEMRA_PLUGIN_PATH")) {
        std::string_view rest = env_path;
        while (true) {
          size_t colon = rest.find(':');
          add(fs::path(rest.substr(0, colon)), DirOrigin::env_path);
          if (colon == std::string_view::npos) break;
          rest.remove_prefix(colon + 1);
        }
      }
    }
    if (options.use_install_dir) {
      fs::path exe_dir = options.exe_dir;
      if (exe_dir.empty()) {
        std::error_code ec;
        fs::path exe = fs::read_symlink("/proc/self/exe", ec);
        if (!ec) exe_dir = exe.parent_path();
      }
      if (!exe_dir.empty()) add((exe_dir / ".." / "lib" / "memra" / "plugins").lexically_normal(), DirOrigin::install_dir);
    }
    return out;
  }

  const detail::PluginRecord* find(std::string_view name) const {
    for (const auto& r : records) {
      if (r->info().name == name) return r.get();
    }
    return nullptr;
  }

  Result<PluginInfo> try_file(const fs::path& given) {
    std::error_code abs_ec;
    fs::path file = fs::absolute(given, abs_ec);  // log lines name the file unambiguously
    if (abs_ec) file = given;
    tried.insert(normalised(file));
    detail::RegisteredLookup lookup = [this](std::string_view name) -> std::optional<fs::path> {
      if (const detail::PluginRecord* r = find(name)) return r->info().file;
      return std::nullopt;
    };
    detail::LoadOutcome outcome = detail::load_plugin_file(file, env, lookup);
    if (!outcome.record) {
      env->log(MEMRA_LOG_WARN, "plugin refused: " + file.string() + ": " + outcome.refusal);
      refusals.push_back({file, outcome.refusal});
      return make_error(ErrorCode::unsupported, "plugin refused: " + file.string() + ": " + outcome.refusal);
    }
    const PluginInfo& info = outcome.record->info();
    std::string handles;
    for (const std::string& h : info.handles) handles += (handles.empty() ? "" : ", ") + h;
    env->log(MEMRA_LOG_INFO, "plugin loaded: " + info.name + " " + info.version + " (" +
                                 std::string(to_string(info.kind)) + ": " + handles + ") from " + file.string());
    records.push_back(std::move(outcome.record));
    return records.back()->info();
  }

  std::string registered_summary(PluginKind kind) const {
    std::string s;
    for (const auto& r : records) {
      if (r->info().kind != kind) continue;
      std::string handles;
      for (const std::string& h : r->info().handles) handles += (handles.empty() ? "" : ", ") + h;
      s += (s.empty() ? "" : "; ") + r->info().name + " [" + handles + "]";
    }
    return s.empty() ? "none" : s;
  }

  Result<std::shared_ptr<const detail::PluginRecord>> select(PluginKind kind, std::string_view handled,
                                                             const memra_device_info& device) const {
    const char* what = kind == PluginKind::family ? "architecture" : "quant scheme";
    std::string handled_s(handled);
    std::shared_ptr<const detail::PluginRecord> best;
    int32_t best_score = -1;
    std::string rejected;
    for (const auto& r : records) {
      if (r->info().kind != kind) continue;
      const auto& hs = r->info().handles;
      if (std::find(hs.begin(), hs.end(), handled_s) == hs.end()) continue;
      int32_t s = r->score(device, handled_s.c_str());
      if (s < 0) {
        rejected += (rejected.empty() ? "" : ", ") + r->info().name + " (score " + std::to_string(s) + ")";
        continue;
      }
      if (!best || s > best_score) {
        best = r;
        best_score = s;
      }
    }
    if (best) return best;
    std::string device_name = std::string(device.arch != nullptr ? device.arch : "?") + " (" +
                              (device.name != nullptr ? device.name : "?") + ")";
    if (!rejected.empty()) {
      return make_error(ErrorCode::unsupported, std::string(to_string(kind)) + " plugins handling " + what + " '" +
                                                    handled_s + "' cannot run on device " + device_name + ": " +
                                                    rejected + "; use another device or install a plugin that supports it");
    }
    return make_error(ErrorCode::not_found,
                      "no " + std::string(to_string(kind)) + " plugin handles " + what + " '" + handled_s +
                          "' (registered: " + registered_summary(kind) + "; " + std::to_string(refusals.size()) +
                          " file(s) refused, see the log); add one with --plugin-dir or MEMRA_PLUGIN_PATH");
  }

  Result<std::shared_ptr<const detail::PluginRecord>> by_name(PluginKind kind, std::string_view name) const {
    for (const auto& r : records) {
      if (r->info().name == name && r->info().kind == kind) return std::shared_ptr<const detail::PluginRecord>(r);
    }
    return make_error(ErrorCode::not_found, "no " + std::string(to_string(kind)) + " plugin named '" +
                                                std::string(name) + "' is registered (registered: " +
                                                registered_summary(kind) + ")");
  }
};

PluginHost::PluginHost(PluginHostOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->env = std::make_shared<const HostEnvironment>(options.services);
  impl_->options = std::move(options);
}

PluginHost::~PluginHost() {
  // Drop our references newest first; a plugin's shutdown runs here unless a handle
  // or object from it is still alive, in which case it runs when the last one goes.
  while (!impl_->records.empty()) impl_->records.pop_back();
}

std::vector<fs::path> PluginHost::search_dirs() const {
  std::vector<fs::path> out;
  for (const SearchDir& d : impl_->dirs()) out.push_back(d.path);
  return out;
}

size_t PluginHost::discover() {
  size_t before = impl_->records.size();
  for (const SearchDir& dir : impl_->dirs()) {
    std::error_code ec;
    if (!fs::is_directory(dir.path, ec)) {
      if (dir.origin == DirOrigin::explicit_dir) {
        impl_->env->log(MEMRA_LOG_WARN, "plugin directory " + dir.path.string() +
                                            " (from --plugin-dir) does not exist or is not a directory");
      } else {
        impl_->env->log(MEMRA_LOG_DEBUG, "plugin directory " + dir.path.string() + " does not exist; skipped");
      }
      continue;
    }
    std::vector<fs::path> files;
    for (fs::directory_iterator it(dir.path, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (!detail::kind_from_file_name(name)) continue;
      std::error_code type_ec;
      if (!it->is_regular_file(type_ec)) continue;  // follows symlinks
      files.push_back(it->path());
    }
    if (ec) {
      impl_->env->log(MEMRA_LOG_WARN, "cannot list plugin directory " + dir.path.string() + ": " + ec.message());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      if (impl_->tried.contains(normalised(file))) continue;  // same file via another directory
      (void)impl_->try_file(file);
    }
  }
  return impl_->records.size() - before;
}

Result<PluginInfo> PluginHost::load(const fs::path& file) { return impl_->try_file(file); }

std::vector<PluginInfo> PluginHost::plugins() const {
  std::vector<PluginInfo> out;
  for (const auto& r : impl_->records) out.push_back(r->info());
  return out;
}

const std::vector<Refusal>& PluginHost::refusals() const { return impl_->refusals; }

Result<FamilyPlugin> PluginHost::family_for(std::string_view architecture, const memra_device_info& device) const {
  auto r = impl_->select(PluginKind::family, architecture, device);
  if (!r) return r.error();
  return FamilyPlugin(std::move(*r));
}

Result<QuantPlugin> PluginHost::quant_for(std::string_view scheme, const memra_device_info& device) const {
  auto r = impl_->select(PluginKind::quant, scheme, device);
  if (!r) return r.error();
  return QuantPlugin(std::move(*r));
}

Result<FamilyPlugin> PluginHost::family(std::string_view plugin_name) const {
  auto r = impl_->by_name(PluginKind::family, plugin_name);
  if (!r) return r.error();
  return FamilyPlugin(std::move(*r));
}

Result<QuantPlugin> PluginHost::quant(std::string_view plugin_name) const {
  auto r = impl_->by_name(PluginKind::quant, plugin_name);
  if (!r) return r.error();
  return QuantPlugin(std::move(*r));
}

const memra_device_info& PluginHost::device_info() const { return impl_->env->device_info(); }

}  // namespace memra::plugins
