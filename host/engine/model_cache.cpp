#include "host/engine/model_cache.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "registry/registry.hpp"
#include "repack/format/file_lock.hpp"
#include "repack/format/freshness.hpp"
#include "repack/format/reader.hpp"
#include "repack/format/sha256.hpp"
#include "repack/format/writer.hpp"
#include "repack/tool/provenance.hpp"
#include "repack/tool/repack.hpp"
#include "repack/tool/source.hpp"
#include "repack/tool/validate.hpp"

namespace memra::engine {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

std::string megabytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

std::string repack_stem(const fs::path& source) {
  std::string stem = source.filename().string();
  if (stem.empty()) stem = source.parent_path().filename().string();
  if (stem.size() > 5 && stem.substr(stem.size() - 5) == ".gguf") stem.resize(stem.size() - 5);
  return stem.empty() ? "model" : stem;
}

// Only what this cache wrote is ever removed; repacks a user made elsewhere are theirs.
bool inside(const fs::path& dir, const fs::path& cache_dir) {
  const fs::path rel = fs::absolute(dir).lexically_normal().lexically_relative(fs::absolute(cache_dir).lexically_normal());
  return !rel.empty() && *rel.begin() != ".." && rel != ".";
}

// A recorded repack's options: only bit-exact ones ("keep") serve a first load.
bool keep_repack(const registry::Repack& row) {
  const auto j = nlohmann::json::parse(row.options_json, nullptr, false);
  return j.is_object() && j.value("quant", "") == "keep" &&
         (!j.contains("tensor_scheme") || (j["tensor_scheme"].is_array() && j["tensor_scheme"].empty()));
}

// What is wrong with a recorded repack, or "" when it can be served as it is.
std::string check_repack(const registry::Repack& row, bool* stale) {
  *stale = false;
  const fs::path dir = row.output_path;
  if (!format::is_memra_dir(dir)) return "it is gone";
  auto hash = format::manifest_sha256(dir);
  if (!hash) return hash.error().message;
  if (*hash != row.output_hash) return "its manifest.json is not the one recorded (sha256 " + hash->substr(0, 12) + "..., recorded " + row.output_hash.substr(0, 12) + "...)";
  auto model = format::MemraModel::open(dir);
  if (!model) return model.error().message;
  std::string why;
  if (!format::source_unchanged(*model, &why)) {
    *stale = true;
    return "its source changed: " + why;
  }
  if (auto crc = model->verify_checksums(); !crc) return crc.error().message;
  return "";
}

// Logs the repack's progress every `every` until stopped.
class ProgressLog {
 public:
  ProgressLog(const repack::Progress& p, const std::string& what, std::chrono::milliseconds every,
              const std::function<void(const std::string&)>& log)
      : thread_([this, &p, what, every, log] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!cv_.wait_for(lock, every, [this] { return stop_; })) {
            const double total = static_cast<double>(p.total_bytes.load());
            const double done = static_cast<double>(p.done_bytes.load());
            const int phase = p.phase.load();
            if (phase == 0) {
              log("repacking " + what + ": validating the checkpoint");
            } else {
              const int percent = total > 0 ? static_cast<int>(100.0 * done / total) : 0;
              log("repacking " + what + ": " + std::to_string(percent) + "% (" + megabytes(done) + " of " +
                  megabytes(total) + " read and written; " + std::to_string(p.tensors_done.load()) + " of " +
                  std::to_string(p.tensors_total.load()) + " tensors)" + (phase == 2 ? ", committing" : ""));
            }
          }
        }) {}
  ~ProgressLog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

fs::path repack_lock_path(const fs::path& cache_dir, const fs::path& source) {
  return format::first_load_lock_path(cache_dir, source);
}

Result<PreparedModel> prepare_model(const std::string& source_text, const ModelCacheOptions& options) {
  const fs::path source = fs::absolute(source_text).lexically_normal();
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  if (format::is_memra_dir(source)) return PreparedModel{source.string(), false, false};
  std::error_code ec;
  if (!fs::exists(source, ec)) return make_error(ErrorCode::not_found, "model path " + source.string() + " does not exist");
  if (!options.plugins) return make_error(ErrorCode::invalid_argument, "prepare_model: no plugin host");
  fs::create_directories(options.cache_dir, ec);
  if (ec) return make_error(ErrorCode::io, "cannot create the repack cache " + options.cache_dir.string() + ": " + ec.message());

  // Whatever killed repacks left behind (their writers' locks are free).
  if (const auto stale = format::remove_stale_temp_dirs(options.cache_dir); stale.removed > 0)
    log("removed " + std::to_string(stale.removed) + " temporary director" + (stale.removed == 1 ? "y" : "ies") + " (" +
        megabytes(static_cast<double>(stale.bytes)) + ") left in " + options.cache_dir.string() + " by killed repacks");

  // One first-load repack of this source at a time, across processes.
  const fs::path lock_file = repack_lock_path(options.cache_dir, source);
  auto lock = format::FileLock::acquire(lock_file, options.cancel, [&] {
    log("waiting for another memra process that is repacking " + source.string() + " (lock " + lock_file.string() + ")");
  });
  if (!lock) return lock.error();

  auto reg = registry::Registry::open(options.registry_path);
  if (!reg) return reg.error();
  auto checkpoints = reg->list_checkpoints();
  if (!checkpoints) return checkpoints.error();
  for (auto ck = checkpoints->rbegin(); ck != checkpoints->rend(); ++ck) {
    if (fs::path(ck->source_path) != source) continue;
    auto repacks = reg->list_repacks(ck->id);
    if (!repacks) return repacks.error();
    for (auto it = repacks->rbegin(); it != repacks->rend(); ++it) {
      if (!keep_repack(*it)) continue;
      const auto t = Clock::now();
      bool stale = false;
      const std::string wrong = check_repack(*it, &stale);
      if (wrong.empty()) {
        log("reusing the repack " + it->output_path + " of " + source.string() + " (recorded " + it->created_at +
            "; verified in " + seconds_text(seconds_since(t)) + " s: manifest hash, every tensor's CRC-32C, source unchanged)");
        return PreparedModel{it->output_path, true, false};
      }
      const bool ours = inside(it->output_path, options.cache_dir);
      log(std::string(stale ? "the repack " : "the repack is damaged: ") + it->output_path + " of " + source.string() +
          ": " + wrong + (ours ? "; removing it and its registry row" : "; forgetting its registry row (it is not in " +
                                                                            options.cache_dir.string() + ")"));
      if (ours) fs::remove_all(it->output_path, ec);
      if (auto gone = reg->delete_repack(it->id); !gone) return gone.error();
    }
  }

  // Nothing to reuse: validate completely, then write.
  const auto t0 = Clock::now();
  log("first load of " + source.string() + ": validating it, then repacking it bit-exactly into " +
      options.cache_dir.string() + " (once; later loads reuse it)");
  {
    auto opened = repack::Source::open(source, *options.plugins);
    if (!opened) return make_error(opened.error().code, "cannot repack " + source.string() + ": " + opened.error().message);
    MEMRA_TRY(repack::validate_source(**opened, *options.plugins));
  }
  if (options.validate) MEMRA_TRY(options.validate());

  repack::RepackOptions ro;
  ro.plugins = options.plugins;
  ro.cancel = options.cancel;
  ro.fault = options.fault;
  ro.source = source;
  ro.output = options.cache_dir;
  ro.name_by_content = true;
  ro.name_stem = repack_stem(source);
  ro.quant = "keep";
  repack::Progress progress;
  ro.progress = &progress;
  Result<repack::RepackResult> result = make_error(ErrorCode::internal, "not run");
  for (int attempt = 0; attempt < 2; ++attempt) {
    {
      ProgressLog lines(progress, source.string(), options.progress_every, log);
      result = repack::repack_checkpoint(ro);
    }
    if (!result) return make_error(result.error().code, result.error().message.rfind("cannot repack", 0) == 0
                                                            ? result.error().message
                                                            : "cannot repack " + source.string() + ": " + result.error().message);
    if (!result->existing) break;
    // The same bytes repacked the same way are there already, unrecorded: use them if
    // they verify, else replace them.
    registry::Repack probe;
    probe.output_path = result->output.string();
    auto hash = format::manifest_sha256(result->output);
    probe.output_hash = hash ? *hash : "";
    bool stale = false;
    const std::string wrong = check_repack(probe, &stale);
    if (wrong.empty()) {
      result->manifest_sha256 = probe.output_hash;
      log("found " + result->output.string() + ", a repack of the same bytes with the same options; verified, using it");
      break;
    }
    log("removing " + result->output.string() + ": " + wrong);
    fs::remove_all(result->output, ec);
    if (attempt == 1) return make_error(ErrorCode::io, "cannot repack " + source.string() + ": " + result->output.string() + " keeps coming back damaged");
  }
  auto ids = repack::record_provenance(options.registry_path, *result, ro);
  if (!ids) return make_error(ids.error().code, "repacked " + source.string() + " but could not record it: " + ids.error().message);
  log("repacked " + source.string() + " into " + result->output.string() + " in " + seconds_text(seconds_since(t0)) +
      " s; provenance recorded (checkpoint " + std::to_string(ids->checkpoint_id) + ", repack " +
      std::to_string(ids->repack_id) + ")");
  return PreparedModel{result->output.string(), false, true};
}

}  // namespace memra::engine
