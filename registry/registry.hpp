// memra::registry — the sqlite registry that records checkpoint provenance
// (checkpoints, repacks) and gates what may load (combos → verdict).
//
// One database file (default: $MEMRA_REGISTRY, else $MEMRA_HOME/registry.db,
// MEMRA_HOME defaulting to $HOME/.memra), WAL mode, versioned migrations.
// Every write runs in its own BEGIN IMMEDIATE transaction, so several processes
// may write at once: they serialize (up to the busy timeout) instead of failing.
// See docs/REGISTRY.md for the schema and the verdict semantics.
//
// No function here throws or aborts; errors come back as memra::Result with a
// message that names the database path and says what to do.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"

namespace memra::registry {

// Schema version this code writes. A database with a higher version is refused.
inline constexpr int kSchemaVersion = 1;

// ---- enums -----------------------------------------------------------------

// Whether a (family, quant, drafter, arch) combination may load.
//   supported: verified by the gates (oracle tests, speed) on that arch.
//   generic:   not verified and not rejected — the generic path may run, but the
//              host only loads it with --allow-generic. A combo without a row is
//              generic.
//   rejected:  known not to work; never loads.
enum class Verdict { supported, generic, rejected };
const char* to_string(Verdict v);
Result<Verdict> parse_verdict(std::string_view text);

enum class CheckpointFormat { safetensors, gguf, memra };
const char* to_string(CheckpointFormat f);
Result<CheckpointFormat> parse_format(std::string_view text);

// Device architectures a combo can name: "sm_90a", "sm_120a", "cpu".
bool is_known_arch(std::string_view arch);
const std::vector<std::string>& known_arches();

// ---- rows --------------------------------------------------------------------

// What the repack tool (or first load) records about a source checkpoint.
struct CheckpointInfo {
  std::string source_path;       // stored absolute and lexically normalised
  CheckpointFormat format = CheckpointFormat::safetensors;
  std::string sha256;            // 64 hex digits (stored lower-case)
  std::uint64_t size_bytes = 0;
  std::string family;            // model family plugin name, e.g. "llama"
  std::string architecture;      // the checkpoint's own architecture, e.g. "LlamaForCausalLM"
  std::string quant;             // quant scheme of the weights, e.g. "bf16", "q4_k"
  std::string parameters_json = "{}";  // JSON object (hyper-parameters, config excerpt)
};

struct Checkpoint : CheckpointInfo {
  std::int64_t id = 0;
  std::string recorded_at;       // ISO-8601 UTC of the first record
};

// One repack run: a checkpoint turned into an output (.memra dir or file).
struct RepackInfo {
  std::int64_t checkpoint_id = 0;
  std::string output_path;       // stored absolute and lexically normalised
  std::string output_hash;       // hash of the output (e.g. sha256 of manifest.json)
  std::string tool_version;      // e.g. "memra-repack 0.1.0"
  std::string options_json = "{}";  // JSON object: the options the tool ran with
};

struct Repack : RepackInfo {
  std::int64_t id = 0;
  std::string created_at;        // ISO-8601 UTC
};

struct ComboKey {
  std::string family;            // e.g. "llama"
  std::string quant;             // e.g. "q4_k"
  std::string drafter;           // speculative drafter; "" = none
  std::string arch;              // "sm_90a" | "sm_120a" | "cpu"
};

struct Combo {
  ComboKey key;
  Verdict verdict = Verdict::generic;
  // JSON object: {"notes": "...", "gates": [{"gate","result","tok_s","note","at"}...], ...}
  std::string evidence_json = "{}";
  std::string source;            // "shipped:vN", "import:vN" or "gate"
  std::string updated_at;        // ISO-8601 UTC
};

// Empty field = any.
struct ComboFilter {
  std::string arch;
  std::string family;
  std::string quant;
};

// One gate run to append to a combo's evidence.
struct GateRecord {
  ComboKey key;
  std::string gate;              // gate name, e.g. "oracle-logits", "bench-decode"
  bool pass = false;
  std::optional<double> tok_s;   // measured tokens per second, if the gate measured speed
  std::string note;
  std::optional<Verdict> verdict;  // set the combo's verdict too
};

struct ImportReport {
  int version = 0;               // the file's "version"
  std::size_t inserted = 0;      // new rows
  std::size_t updated = 0;       // rows replaced by the file's entry
  std::size_t kept_local = 0;    // rows with higher-precedence local evidence left alone
  std::size_t removed = 0;       // old shipped rows the new shipped file no longer lists
  bool skipped = false;          // shipped import: the database already has this version or newer
};

struct ImportOptions {
  // Replace rows recorded by record_gate (source "gate") too. Default: local gate
  // evidence wins over any file.
  bool overwrite_local = false;
};

struct OpenOptions {
  int busy_timeout_ms = 15000;
  // Import the shipped combos on first use and when their version is newer.
  bool import_shipped = true;
  // Use this text instead of the combos.json embedded at build time (tests, packagers).
  std::optional<std::string> shipped_combos_json;
};

// ---- paths -----------------------------------------------------------------------

// $MEMRA_HOME, else $HOME/.memra. Error if neither is set.
Result<std::filesystem::path> memra_home();
// $MEMRA_REGISTRY if set and non-empty, else memra_home()/registry.db.
Result<std::filesystem::path> default_path();

// The combos.json embedded at build time (registry/data/combos.json).
std::string_view shipped_combos_json();

// ---- the registry ----------------------------------------------------------------

class Registry {
 public:
  // Opens (creating the parent directory and the file if absent), checks that the
  // file is a healthy memra registry, applies pending migrations, and imports the
  // shipped combos when they are newer than what the database holds.
  static Result<Registry> open(const std::filesystem::path& path, const OpenOptions& options = {});

  Registry(Registry&&) noexcept;
  Registry& operator=(Registry&&) noexcept;
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  const std::filesystem::path& path() const;
  Result<int> schema_version() const;
  // Version of the shipped combos file last imported (0 = none).
  Result<int> shipped_combos_version() const;

  // Records a checkpoint. Recording the same (source_path, sha256) again updates
  // the metadata and returns the existing row (same id).
  Result<Checkpoint> record_checkpoint(const CheckpointInfo& info);
  // Records one repack run of an existing checkpoint; every call adds a row.
  Result<Repack> record_repack(const RepackInfo& info);

  Result<std::vector<Checkpoint>> list_checkpoints() const;
  // All repacks, or those of one checkpoint.
  Result<std::vector<Repack>> list_repacks(std::optional<std::int64_t> checkpoint_id = std::nullopt) const;

  // Removes one repack row (its output is not touched). False when there was none.
  Result<bool> delete_repack(std::int64_t id);
  // Removes one checkpoint row and the rows of its repacks. False when there was none.
  Result<bool> delete_checkpoint(std::int64_t id);

  // key: a decimal id, a 64-hex sha256, or a path. A path matches a checkpoint's
  // source_path first, then a repack's output_path (giving that repack's
  // checkpoint). ErrorCode::not_found when nothing matches.
  Result<Checkpoint> find_checkpoint(std::string_view key) const;

  Result<std::vector<Combo>> combos(const ComboFilter& filter = {}) const;
  // The row for this exact key, or nullopt.
  Result<std::optional<Combo>> find_combo(const ComboKey& key) const;
  // The verdict for this key; no row = Verdict::generic.
  Result<Verdict> check(const ComboKey& key) const;

  // Imports a combos file ({"format":"memra-combos","version":N,"combos":[...]});
  // rows get source "import:vN". Rows from record_gate are kept unless
  // options.overwrite_local.
  Result<ImportReport> import_combos(const std::filesystem::path& file, const ImportOptions& options = {});
  // Imports shipped combos text (source "shipped:vN") if its version is newer than
  // the one recorded; rows of older shipped versions that it no longer lists are
  // removed. Rows from import_combos or record_gate are left alone.
  Result<ImportReport> import_shipped(std::string_view json_text);

  // Appends one gate result to the combo's evidence (creating the row as generic
  // if absent), optionally sets its verdict; the row's source becomes "gate".
  Result<Combo> record_gate(const GateRecord& record);

  struct Impl;

 private:
  explicit Registry(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra::registry
