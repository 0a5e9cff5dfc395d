// JSON in and out of the registry: the combos file format, and the documents
// the CLI prints with --json. nlohmann/json stays inside json.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "registry/registry.hpp"

namespace memra::registry {

// ---- combos file: {"format":"memra-combos","version":N,"combos":[...]} ----------
struct ComboFileEntry {
  ComboKey key;
  Verdict verdict = Verdict::generic;
  std::string evidence_json = "{}";  // compact JSON object
};

struct ComboFile {
  int version = 0;
  std::vector<ComboFileEntry> combos;
};

// `origin` names the text in error messages (a path, or "the built-in combos").
Result<ComboFile> parse_combos_file(std::string_view text, std::string_view origin);

// ---- documents printed by `memra-registry ... --json` ------------------------------
std::string checkpoint_json(const Checkpoint& c);
std::string repack_json(const Repack& r);
std::string combo_json(const Combo& c);
// {"checkpoints":[...],"repacks":[...]}
std::string list_json(const std::vector<Checkpoint>& checkpoints, const std::vector<Repack>& repacks);
// {"checkpoint":{...},"repacks":[...]}
std::string show_json(const Checkpoint& checkpoint, const std::vector<Repack>& repacks);
// {"combos":[...]}
std::string combos_json(const std::vector<Combo>& combos);
// {"family","quant","drafter","arch","verdict","combo":{...}|null}
std::string check_json(const ComboKey& key, Verdict verdict, const std::optional<Combo>& row);
// {"version","inserted","updated","kept_local","removed","skipped"}
std::string import_report_json(const ImportReport& report);

// One line for tables: "3 gates (2 pass), last: bench fail 41.2 tok/s — notes".
std::string evidence_summary(std::string_view evidence_json);

}  // namespace memra::registry
