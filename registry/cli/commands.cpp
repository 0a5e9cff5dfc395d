#include "registry/cli/commands.hpp"

#include <cerrno>
#include <cstdlib>
#include <iostream>

#include "registry/cli/prune.hpp"
#include "registry/cli/table.hpp"
#include "registry/json.hpp"
#include "registry/registry.hpp"

namespace memra::registry::cli {
namespace {

const FlagSpec kDbFlag{"db", "PATH",
                       "registry database (default: $MEMRA_REGISTRY, else $MEMRA_HOME/registry.db; "
                       "MEMRA_HOME defaults to ~/.memra)"};
const FlagSpec kJsonFlag{"json", "", "print JSON instead of a table"};

std::vector<FlagSpec> key_flags(bool arch_required) {
  return {{"family", "F", "model family, e.g. llama", true},
          {"quant", "Q", "quant scheme, e.g. q4_k", true},
          {"drafter", "D", "speculative drafter (omit for none)"},
          {"arch", "A", "device architecture: sm_90a, sm_120a or cpu", arch_required}};
}

int fail(const Error& e) {
  std::cerr << "memra-registry: error: " << e.message << "\n";
  return e.code == ErrorCode::invalid_argument ? kExitUsage : kExitError;
}

int usage_fail(const std::string& command, const std::string& message) {
  std::cerr << "memra-registry " << command << ": " << message << "\nRun 'memra-registry " << command
            << " --help' for details.\n";
  return kExitUsage;
}

enum class Access { read, write };

// Read-only commands never create a registry: where none exists yet they answer from an
// in-memory one holding just the shipped combos (what a host would import on its first run).
Result<Registry> open_registry(const Parsed& args, Access access) {
  std::filesystem::path path;
  if (args.values.count("db")) {
    path = args.get("db");
  } else {
    auto def = default_path();
    if (!def.ok()) return def.error();
    path = *def;
  }
  std::error_code ec;
  if (access == Access::read && !std::filesystem::exists(path, ec)) {
    std::cerr << "memra-registry: no registry at " << path.string()
              << " yet (nothing recorded there); answering from the shipped combos\n";
    return Registry::open(":memory:");
  }
  return Registry::open(path);
}

ComboKey key_from(const Parsed& args) {
  return {args.get("family"), args.get("quant"), args.get("drafter"), args.get("arch")};
}

std::string key_text(const ComboKey& k) {
  return k.family + "/" + k.quant + "/" + (k.drafter.empty() ? "-" : k.drafter) + "/" + k.arch;
}

std::string short_hash(const std::string& h) { return h.size() > 12 ? h.substr(0, 12) : h; }

void print_repacks(const std::vector<Repack>& repacks) {
  Table t({"ID", "CHECKPOINT", "TOOL", "OUTPUT HASH", "CREATED", "OUTPUT"});
  for (const auto& r : repacks)
    t.add({std::to_string(r.id), std::to_string(r.checkpoint_id), r.tool_version, short_hash(r.output_hash),
           r.created_at, r.output_path});
  t.print(std::cout);
}

// ---- prune ---------------------------------------------------------------------
int run_prune(const Parsed& args) {
  auto reg = open_registry(args, args.has("dry-run") ? Access::read : Access::write);
  if (!reg.ok()) return fail(reg.error());
  PruneOptions o;
  o.dry_run = args.has("dry-run");
  o.verify = args.has("verify");
  if (args.values.count("repacks")) {
    o.repacks_dir = args.get("repacks");
  } else {
    auto home = memra_home();
    if (!home.ok()) return fail(home.error());
    o.repacks_dir = *home / "repacks";
  }
  auto report = prune(*reg, o);
  if (!report.ok()) return fail(report.error());
  for (const auto& line : report->lines) std::cout << line << "\n";
  std::cout << (o.dry_run ? "would prune " : "pruned ") << report->repack_rows << " repack row(s), "
            << report->checkpoint_rows << " checkpoint row(s) and " << report->directories << " director"
            << (report->directories == 1 ? "y" : "ies") << " (" << report->bytes / 1000000 << " MB)\n";
  return kExitOk;
}

// ---- list ----------------------------------------------------------------------
int run_list(const Parsed& args) {
  auto reg = open_registry(args, Access::read);
  if (!reg.ok()) return fail(reg.error());
  auto checkpoints = reg->list_checkpoints();
  if (!checkpoints.ok()) return fail(checkpoints.error());
  auto repacks = reg->list_repacks();
  if (!repacks.ok()) return fail(repacks.error());
  if (args.has("json")) {
    std::cout << list_json(*checkpoints, *repacks) << "\n";
    return kExitOk;
  }
  std::cout << "Registry " << reg->path().string() << "\n\n";
  if (checkpoints->empty()) {
    std::cout << "No checkpoints recorded.\n";
  } else {
    std::cout << "Checkpoints (" << checkpoints->size() << ")\n";
    Table t({"ID", "FORMAT", "FAMILY", "ARCHITECTURE", "QUANT", "SIZE", "SHA256", "RECORDED", "SOURCE"});
    for (const auto& c : *checkpoints)
      t.add({std::to_string(c.id), to_string(c.format), c.family, c.architecture, c.quant,
             human_bytes(c.size_bytes), short_hash(c.sha256), c.recorded_at, c.source_path});
    t.print(std::cout);
  }
  std::cout << "\n";
  if (repacks->empty()) {
    std::cout << "No repacks recorded.\n";
  } else {
    std::cout << "Repacks (" << repacks->size() << ")\n";
    print_repacks(*repacks);
  }
  return kExitOk;
}

// ---- show ----------------------------------------------------------------------
int run_show(const Parsed& args) {
  auto reg = open_registry(args, Access::read);
  if (!reg.ok()) return fail(reg.error());
  auto c = reg->find_checkpoint(args.positionals[0]);
  if (!c.ok()) return fail(c.error());
  auto repacks = reg->list_repacks(c->id);
  if (!repacks.ok()) return fail(repacks.error());
  if (args.has("json")) {
    std::cout << show_json(*c, *repacks) << "\n";
    return kExitOk;
  }
  std::cout << "Checkpoint " << c->id << "\n";
  Table t({"FIELD", "VALUE"});
  t.add({"source_path", c->source_path});
  t.add({"format", to_string(c->format)});
  t.add({"sha256", c->sha256});
  t.add({"size", human_bytes(c->size_bytes) + " (" + std::to_string(c->size_bytes) + " bytes)"});
  t.add({"family", c->family});
  t.add({"architecture", c->architecture});
  t.add({"quant", c->quant});
  t.add({"parameters", c->parameters_json});
  t.add({"recorded_at", c->recorded_at});
  t.print(std::cout);
  std::cout << "\n";
  if (repacks->empty()) {
    std::cout << "No repacks of this checkpoint.\n";
  } else {
    std::cout << "Repacks (" << repacks->size() << ")\n";
    print_repacks(*repacks);
  }
  return kExitOk;
}

// ---- combos ----------------------------------------------------------------------
int run_combos(const Parsed& args) {
  ComboFilter filter{args.get("arch"), args.get("family"), args.get("quant")};
  if (!filter.arch.empty() && !is_known_arch(filter.arch))
    return usage_fail("combos", "unknown arch '" + filter.arch + "'; use sm_90a, sm_120a or cpu");
  auto reg = open_registry(args, Access::read);
  if (!reg.ok()) return fail(reg.error());
  auto rows = reg->combos(filter);
  if (!rows.ok()) return fail(rows.error());
  if (args.has("json")) {
    std::cout << combos_json(*rows) << "\n";
    return kExitOk;
  }
  if (rows->empty()) {
    std::cout << "No combos match. A combo without a row is 'generic' (not verified, not rejected).\n";
    return kExitOk;
  }
  Table t({"FAMILY", "QUANT", "DRAFTER", "ARCH", "VERDICT", "SOURCE", "UPDATED", "EVIDENCE"});
  for (const auto& c : *rows)
    t.add({c.key.family, c.key.quant, c.key.drafter.empty() ? "-" : c.key.drafter, c.key.arch,
           to_string(c.verdict), c.source, c.updated_at, ellipsize(evidence_summary(c.evidence_json), 72)});
  t.print(std::cout);
  return kExitOk;
}

// ---- check ----------------------------------------------------------------------
int run_check(const Parsed& args) {
  auto reg = open_registry(args, Access::read);
  if (!reg.ok()) return fail(reg.error());
  ComboKey key = key_from(args);
  auto row = reg->find_combo(key);
  if (!row.ok()) return fail(row.error());
  Verdict verdict = *row ? (*row)->verdict : Verdict::generic;  // same rule as Registry::check
  if (args.has("json"))
    std::cout << check_json(key, verdict, *row) << "\n";
  else
    std::cout << to_string(verdict) << "\n";
  switch (verdict) {
    case Verdict::supported: return kExitOk;
    case Verdict::generic: return kExitGeneric;
    case Verdict::rejected: return kExitRejected;
  }
  return kExitError;
}

// ---- import ----------------------------------------------------------------------
int run_import(const Parsed& args) {
  auto reg = open_registry(args, Access::write);
  if (!reg.ok()) return fail(reg.error());
  ImportOptions options;
  options.overwrite_local = args.has("force");
  auto report = reg->import_combos(args.positionals[0], options);
  if (!report.ok()) return fail(report.error());
  std::cout << "Imported " << args.positionals[0] << " (version " << report->version << ") into "
            << reg->path().string() << ": " << report->inserted << " inserted, " << report->updated
            << " updated, " << report->kept_local << " kept (local gate evidence wins; --force replaces it)\n";
  return kExitOk;
}

// ---- record-gate ----------------------------------------------------------------------
int run_record_gate(const Parsed& args) {
  GateRecord record;
  record.key = key_from(args);
  record.gate = args.get("gate");
  std::string result = args.get("result");
  if (result != "pass" && result != "fail")
    return usage_fail("record-gate", "--result must be pass or fail (got '" + result + "')");
  record.pass = result == "pass";
  if (args.values.count("tok-s")) {
    std::string text = args.get("tok-s");
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno != 0)
      return usage_fail("record-gate", "--tok-s must be a number (got '" + text + "')");
    record.tok_s = v;
  }
  record.note = args.get("note");
  if (args.values.count("verdict")) {
    auto v = parse_verdict(args.get("verdict"));
    if (!v.ok()) return usage_fail("record-gate", v.error().message);
    record.verdict = *v;
  }
  auto reg = open_registry(args, Access::write);
  if (!reg.ok()) return fail(reg.error());
  auto combo = reg->record_gate(record);
  if (!combo.ok()) return fail(combo.error());
  std::cout << "Recorded gate '" << record.gate << "' (" << result << ") for " << key_text(combo->key)
            << ": verdict " << to_string(combo->verdict) << "; "
            << ellipsize(evidence_summary(combo->evidence_json), 72) << "\n";
  return kExitOk;
}

std::vector<Command> build() {
  std::vector<Command> cmds;
  cmds.push_back({{"list", "List the recorded checkpoints and repacks.", {}, {kJsonFlag, kDbFlag}, ""}, run_list});
  cmds.push_back({{"show",
                   "Show one checkpoint and its repacks. KEY is a checkpoint id, a sha256, a source path, or a "
                   "repack's output path.",
                   {"KEY"},
                   {kJsonFlag, kDbFlag},
                   "Exit status: 0 found, 1 not found or registry error, 2 usage error.\n"},
                  run_show});
  cmds.push_back({{"combos",
                   "List combos (family, quant, drafter, arch → verdict) with their evidence. Filters combine.",
                   {},
                   {{"arch", "A", "only this device architecture (sm_90a, sm_120a, cpu)"},
                    {"family", "F", "only this model family"},
                    {"quant", "Q", "only this quant scheme"},
                    kJsonFlag,
                    kDbFlag},
                   ""},
                  run_combos});
  auto check_flags = key_flags(true);
  check_flags.push_back(kJsonFlag);
  check_flags.push_back(kDbFlag);
  cmds.push_back({{"check",
                   "Print the verdict for a combo: supported, generic or rejected. A combo without a row is "
                   "generic (not verified, not rejected).",
                   {},
                   check_flags,
                   "Exit status: 0 supported, 3 generic, 4 rejected, 1 registry error, 2 usage error.\n"
                   "Example: memra-registry check --family llama --quant q4_k --arch cpu\n"},
                  run_check});
  cmds.push_back({{"prune",
                   "Remove registry rows and repack directories that no longer match: repacks whose directory "
                   "is gone, whose manifest is not the recorded one or does not validate, or whose source "
                   "changed; checkpoints left without repacks; and in the repack cache, temporary directories of "
                   "killed repacks and repacks no row names.",
                   {},
                   {{"dry-run", "", "print what would go, change nothing"},
                    {"verify", "", "also check every tensor's CRC-32C (reads every repack whole)"},
                    {"repacks", "DIR", "the first-load repack cache (default $MEMRA_HOME/repacks)"},
                    kDbFlag},
                   "Directories are removed only inside the repack cache; a repack written elsewhere with\n"
                   "memra-repack -o loses its row only. Example: memra-registry prune --dry-run\n"},
                  run_prune});
  cmds.push_back({{"import",
                   "Import a combos file ({\"format\":\"memra-combos\",\"version\":N,\"combos\":[...]}). Rows "
                   "recorded by record-gate are kept unless --force.",
                   {"FILE"},
                   {{"force", "", "also replace rows recorded locally by record-gate"}, kDbFlag},
                   ""},
                  run_import});
  auto gate_flags = key_flags(true);
  gate_flags.push_back({"gate", "NAME", "gate name, e.g. oracle-logits or bench-decode", true});
  gate_flags.push_back({"result", "pass|fail", "the gate's result", true});
  gate_flags.push_back({"tok-s", "X", "measured tokens per second"});
  gate_flags.push_back({"note", "TEXT", "free text kept with the result"});
  gate_flags.push_back({"verdict", "V", "also set the combo's verdict: supported, generic or rejected"});
  gate_flags.push_back(kDbFlag);
  cmds.push_back({{"record-gate",
                   "Append a gate result to a combo's evidence (creating the combo as generic if absent), "
                   "optionally setting its verdict. The row's source becomes 'gate'.",
                   {},
                   gate_flags,
                   "Example: memra-registry record-gate --family llama --quant q4_k --arch sm_90a \\\n"
                   "           --gate bench-decode --result pass --tok-s 212.5 --verdict supported\n"},
                  run_record_gate});
  return cmds;
}

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> cmds = build();
  return cmds;
}

const Command* find_command(const std::string& name) {
  for (const auto& c : commands())
    if (c.spec.name == name) return &c;
  return nullptr;
}

std::string overview() {
  std::string text =
      "Usage: memra-registry [--db PATH] <command> [options]\n\n"
      "Inspect and edit the memra registry: checkpoint provenance and the combos that gate what may load.\n\n"
      "Commands:\n";
  for (const auto& c : commands()) {
    const std::string& summary = c.spec.summary;
    auto stop = summary.find(". ");
    std::string first = stop == std::string::npos ? summary : summary.substr(0, stop + 1);
    text += "  " + c.spec.name + std::string(13 - c.spec.name.size(), ' ') + first + "\n";
  }
  text +=
      "\nRun 'memra-registry <command> --help' for a command's options.\n\n"
      "Database: --db PATH, else $MEMRA_REGISTRY, else $MEMRA_HOME/registry.db (MEMRA_HOME defaults to ~/.memra).\n"
      "Exit status: 0 ok, 1 registry or file error, 2 usage error; check also 3 generic, 4 rejected.\n";
  return text;
}

}  // namespace memra::registry::cli
