#include "registry/cli/prune.hpp"

#include <map>
#include <optional>
#include <set>

#include "repack/format/file_lock.hpp"
#include "repack/format/freshness.hpp"
#include "repack/format/reader.hpp"
#include "repack/format/writer.hpp"

namespace memra::registry::cli {
namespace {

namespace fs = std::filesystem;

std::uint64_t tree_bytes(const fs::path& dir) {
  std::uint64_t n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code e2;
    if (it->is_regular_file(e2)) n += it->file_size(e2);
  }
  return n;
}

bool inside(const fs::path& p, const fs::path& dir) {
  const fs::path rel = fs::absolute(p).lexically_normal().lexically_relative(fs::absolute(dir).lexically_normal());
  return !rel.empty() && *rel.begin() != ".." && rel != fs::path(".");
}

// Why a recorded repack no longer matches, or nullopt.
std::optional<std::string> mismatch(const Repack& row, bool verify) {
  const fs::path dir = row.output_path;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return std::string("its directory is gone");
  if (!format::is_memra_dir(dir)) return std::string("it is not a .memra directory (no manifest.json)");
  auto hash = format::manifest_sha256(dir);
  if (!hash) return hash.error().message;
  if (*hash != row.output_hash) return std::string("its manifest.json is not the one recorded");
  auto model = format::MemraModel::open(dir);
  if (!model) return model.error().message;
  std::string why;
  if (!format::source_unchanged(*model, &why)) return "its source no longer matches (" + why + ")";
  if (verify)
    if (auto crc = model->verify_checksums(); !crc) return crc.error().message;
  return std::nullopt;
}

}  // namespace

Result<PruneReport> prune(Registry& registry, const PruneOptions& o) {
  PruneReport report;
  const std::string verb = o.dry_run ? "would remove " : "removed ";
  auto remove_dir = [&](const fs::path& dir) {
    report.bytes += tree_bytes(dir);
    ++report.directories;
    std::error_code ec;
    if (!o.dry_run) fs::remove_all(dir, ec);
  };

  auto repacks = registry.list_repacks();
  if (!repacks) return repacks.error();
  std::set<fs::path> named;  // directories that keep a row (or were already dealt with)
  std::map<std::int64_t, int> alive;  // checkpoint id -> repacks that stay
  for (const Repack& row : *repacks) {
    const auto why = mismatch(row, o.verify);
    if (!why) {
      named.insert(fs::absolute(row.output_path).lexically_normal());
      ++alive[row.checkpoint_id];
      continue;
    }
    const bool ours = inside(row.output_path, o.repacks_dir);
    std::error_code ec;
    const bool there = fs::exists(row.output_path, ec);
    report.lines.push_back(verb + "repack row " + std::to_string(row.id) + " (" + row.output_path + "): " + *why +
                           (ours && there ? "; and its directory" : ""));
    ++report.repack_rows;
    if (ours && there) {
      remove_dir(row.output_path);
      named.insert(fs::absolute(row.output_path).lexically_normal());  // handled (a dry run leaves it there)
    }
    if (!o.dry_run)
      if (auto gone = registry.delete_repack(row.id); !gone) return gone.error();
  }
  auto checkpoints = registry.list_checkpoints();
  if (!checkpoints) return checkpoints.error();
  for (const Checkpoint& ck : *checkpoints) {
    if (alive.count(ck.id)) continue;
    report.lines.push_back(verb + "checkpoint row " + std::to_string(ck.id) + " (" + ck.source_path + "): no repack of it is left");
    ++report.checkpoint_rows;
    if (!o.dry_run)
      if (auto gone = registry.delete_checkpoint(ck.id); !gone) return gone.error();
  }

  std::error_code ec;
  if (!fs::is_directory(o.repacks_dir, ec)) return report;
  for (const fs::path& tmp : format::stale_temp_dirs(o.repacks_dir)) {
    report.lines.push_back(verb + tmp.string() + ": the temporary directory of a repack that was killed");
    remove_dir(tmp);
  }
  for (const auto& e : fs::directory_iterator(o.repacks_dir, ec)) {
    const fs::path dir = fs::absolute(e.path()).lexically_normal();
    if (dir.extension() != ".memra" || named.count(dir) || !e.is_directory()) continue;
    // A repack is unrecorded for a moment between its rename and its registry row:
    // leave it while the first load of its source holds the lock.
    std::optional<format::FileLock> lock;
    if (auto m = format::MemraModel::open(dir)) {
      auto taken = format::FileLock::try_acquire(format::first_load_lock_path(o.repacks_dir, m->manifest().source.path));
      if (taken && !*taken) continue;
      if (taken) lock = std::move(**taken);
    }
    report.lines.push_back(verb + dir.string() + ": no registry row names it");
    remove_dir(dir);
  }
  return report;
}

}  // namespace memra::registry::cli
