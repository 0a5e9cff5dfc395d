#include "host/engine/model_cache.hpp"

#include <chrono>

#include "registry/registry.hpp"
#include "repack/format/reader.hpp"
#include "repack/tool/provenance.hpp"
#include "repack/tool/repack.hpp"

namespace memra::engine {
namespace {

namespace fs = std::filesystem;

// The manifest's source files still look the same: sizes equal, none modified after
// the repack was written.
bool source_unchanged(const fs::path& source, const format::MemraModel& repack) {
  std::error_code ec;
  const auto made = fs::last_write_time(repack.dir() / "manifest.json", ec);
  if (ec) return false;
  auto same = [&](const fs::path& p, uint64_t size) {
    std::error_code e2;
    const auto actual = fs::file_size(p, e2);
    if (e2 || actual != size) return false;
    const auto mtime = fs::last_write_time(p, e2);
    return !e2 && mtime <= made;
  };
  if (!fs::is_directory(source, ec)) return same(source, repack.manifest().source.size);
  for (const format::SourceFile& f : repack.manifest().source.files)
    if (!same(source / f.path, f.size)) return false;
  return true;
}

std::string repack_name(const fs::path& source) {
  std::string stem = source.filename().string();
  if (stem.empty()) stem = source.parent_path().filename().string();
  if (stem.size() > 5 && stem.substr(stem.size() - 5) == ".gguf") stem.resize(stem.size() - 5);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return stem + "-" + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()) + ".memra";
}

}  // namespace

Result<PreparedModel> prepare_model(const std::string& source_text, const ModelCacheOptions& options) {
  const fs::path source = fs::absolute(source_text).lexically_normal();
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  if (format::is_memra_dir(source)) return PreparedModel{source.string(), false, false};
  std::error_code ec;
  if (!fs::exists(source, ec)) return make_error(ErrorCode::not_found, "model path " + source.string() + " does not exist");

  auto reg = registry::Registry::open(options.registry_path);
  if (!reg) return reg.error();
  if (auto ck = reg->find_checkpoint(source.string()); ck && ck->source_path == source.string()) {
    auto repacks = reg->list_repacks(ck->id);
    if (repacks) {
      for (auto it = repacks->rbegin(); it != repacks->rend(); ++it) {
        if (!format::is_memra_dir(it->output_path)) continue;
        auto m = format::MemraModel::open(it->output_path);
        if (!m || !source_unchanged(source, *m)) continue;
        log("reusing the repack " + it->output_path + " of " + source.string() + " (recorded " + it->created_at + ")");
        return PreparedModel{it->output_path, true, false};
      }
    }
  }

  fs::create_directories(options.cache_dir, ec);
  if (ec) return make_error(ErrorCode::io, "cannot create the repack cache " + options.cache_dir.string() + ": " + ec.message());
  repack::RepackOptions ro;
  ro.plugins = options.plugins;
  ro.cancel = options.cancel;
  ro.fault = options.fault;
  ro.source = source;
  ro.output = options.cache_dir / repack_name(source);
  ro.quant = "keep";
  log("first load of " + source.string() + ": repacking into " + ro.output.string() + " (bit-exact, once)");
  auto result = repack::repack_checkpoint(ro);
  if (!result) return make_error(result.error().code, "cannot repack " + source.string() + ": " + result.error().message);
  auto ids = repack::record_provenance(options.registry_path, *result, ro);
  if (!ids) return make_error(ids.error().code, "repacked " + source.string() + " but could not record it: " + ids.error().message);
  log("repacked " + source.string() + " in " + std::to_string(result->validate_seconds + result->write_seconds + result->commit_seconds) +
      " s; provenance recorded (checkpoint " + std::to_string(ids->checkpoint_id) + ", repack " + std::to_string(ids->repack_id) + ")");
  return PreparedModel{result->output.string(), false, true};
}

}  // namespace memra::engine
