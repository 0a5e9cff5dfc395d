// The only library file that uses nlohmann/json (it costs seconds per TU).
#include "registry/json.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <set>
#include <tuple>

#include "registry/impl.hpp"

namespace memra::registry {
namespace {

// ordered_json keeps members in file order (evidence notes before gates, ids first).
using json = nlohmann::ordered_json;

// Embedded JSON columns are stored valid (schema CHECKs); fall back to the raw
// text as a string rather than throwing if one is not.
json embedded(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json(text) : j;
}

json to_j(const Checkpoint& c) {
  return json{{"id", c.id},
              {"source_path", c.source_path},
              {"format", to_string(c.format)},
              {"sha256", c.sha256},
              {"size_bytes", c.size_bytes},
              {"family", c.family},
              {"architecture", c.architecture},
              {"quant", c.quant},
              {"parameters", embedded(c.parameters_json)},
              {"recorded_at", c.recorded_at}};
}

json to_j(const Repack& r) {
  return json{{"id", r.id},
              {"checkpoint_id", r.checkpoint_id},
              {"output_path", r.output_path},
              {"output_hash", r.output_hash},
              {"tool_version", r.tool_version},
              {"options", embedded(r.options_json)},
              {"created_at", r.created_at}};
}

json to_j(const Combo& c) {
  return json{{"family", c.key.family}, {"quant", c.key.quant},  {"drafter", c.key.drafter},
              {"arch", c.key.arch},     {"verdict", to_string(c.verdict)},
              {"evidence", embedded(c.evidence_json)},
              {"source", c.source},     {"updated_at", c.updated_at}};
}

template <class T>
json array_of(const std::vector<T>& rows) {
  json a = json::array();
  for (const auto& r : rows) a.push_back(to_j(r));
  return a;
}

std::string dump(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace); }

Error file_error(std::string_view origin, const std::string& where, const std::string& what) {
  return make_error(ErrorCode::invalid_argument, std::string(origin) + ": " + where + (where.empty() ? "" : ": ") +
                                                     what + ". See docs/REGISTRY.md for the combos file format.");
}

Result<std::string> string_field(const json& obj, const char* name, bool required, std::string_view origin,
                                 const std::string& where) {
  auto it = obj.find(name);
  if (it == obj.end()) {
    if (required) return file_error(origin, where, std::string("missing '") + name + "'");
    return std::string();
  }
  if (!it->is_string()) return file_error(origin, where, std::string("'") + name + "' must be a string");
  return it->get<std::string>();
}

Result<ComboFile> parse(std::string_view text, std::string_view origin) {
  json doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded()) return file_error(origin, "", "is not valid JSON");
  if (!doc.is_object()) return file_error(origin, "", "the top level must be a JSON object");
  for (const auto& [k, v] : doc.items())
    if (k != "format" && k != "version" && k != "combos" && k != "description")
      return file_error(origin, "", "unknown top-level member '" + k + "'");
  if (doc.value("format", json()) != json("memra-combos"))
    return file_error(origin, "", "'format' must be \"memra-combos\"");
  const json& version = doc.value("version", json());
  if (!version.is_number_integer() || version.get<long long>() < 1 || version.get<long long>() > 1000000)
    return file_error(origin, "", "'version' must be an integer >= 1");
  auto combos = doc.find("combos");
  if (combos == doc.end() || !combos->is_array()) return file_error(origin, "", "'combos' must be an array");

  ComboFile file;
  file.version = static_cast<int>(version.get<long long>());
  std::set<std::tuple<std::string, std::string, std::string, std::string>> seen;
  for (std::size_t i = 0; i < combos->size(); ++i) {
    const json& e = (*combos)[i];
    std::string where = "combos[" + std::to_string(i) + "]";
    if (!e.is_object()) return file_error(origin, where, "must be an object");
    for (const auto& [k, v] : e.items())
      if (k != "family" && k != "quant" && k != "drafter" && k != "arch" && k != "verdict" && k != "evidence")
        return file_error(origin, where, "unknown member '" + k + "'");
    ComboFileEntry entry;
    auto family = string_field(e, "family", true, origin, where);
    auto quant = string_field(e, "quant", true, origin, where);
    auto drafter = string_field(e, "drafter", false, origin, where);
    auto arch = string_field(e, "arch", true, origin, where);
    auto verdict = string_field(e, "verdict", true, origin, where);
    for (auto* r : {&family, &quant, &drafter, &arch, &verdict})
      if (!r->ok()) return r->error();
    entry.key = {*family, *quant, *drafter, *arch};
    if (auto s = validate_key(entry.key); !s.ok()) return file_error(origin, where, s.error().message);
    auto v = parse_verdict(*verdict);
    if (!v.ok()) return file_error(origin, where, v.error().message);
    entry.verdict = *v;
    if (auto ev = e.find("evidence"); ev != e.end()) {
      if (!ev->is_object()) return file_error(origin, where, "'evidence' must be an object");
      if (auto g = ev->find("gates"); g != ev->end() && !g->is_array())
        return file_error(origin, where, "'evidence.gates' must be an array");
      entry.evidence_json = ev->dump(-1, ' ', false, json::error_handler_t::replace);
    }
    if (!seen.insert({entry.key.family, entry.key.quant, entry.key.drafter, entry.key.arch}).second)
      return file_error(origin, where, "duplicate combo " + entry.key.family + "/" + entry.key.quant + "/" +
                                           (entry.key.drafter.empty() ? "-" : entry.key.drafter) + "/" +
                                           entry.key.arch);
    file.combos.push_back(std::move(entry));
  }
  return file;
}

std::string summarize(std::string_view evidence_json) {
  json ev = json::parse(evidence_json.begin(), evidence_json.end(), nullptr, false);
  if (ev.is_discarded() || !ev.is_object()) return "";
  std::string out;
  auto gates = ev.find("gates");
  if (gates != ev.end() && gates->is_array() && !gates->empty()) {
    std::size_t passed = 0;
    for (const auto& g : *gates)
      if (g.is_object() && g.value("result", json()) == json("pass")) ++passed;
    out = std::to_string(gates->size()) + (gates->size() == 1 ? " gate" : " gates") + " (" +
          std::to_string(passed) + " pass)";
    const json& last = gates->back();
    if (last.is_object()) {
      out += ", last: " + last.value("gate", std::string("?")) + " " + last.value("result", std::string("?"));
      if (auto t = last.find("tok_s"); t != last.end() && t->is_number()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, " %.1f tok/s", t->get<double>());
        out += buf;
      }
    }
  }
  if (auto notes = ev.find("notes"); notes != ev.end() && notes->is_string() && !notes->get<std::string>().empty())
    out += (out.empty() ? "" : "; ") + notes->get<std::string>();
  return out;
}

}  // namespace

Result<ComboFile> parse_combos_file(std::string_view text, std::string_view origin) {
  try {
    return parse(text, origin);
  } catch (const std::exception& e) {  // nlohmann accessors may throw on odd input; never let it escape
    return file_error(origin, "", std::string("could not be read: ") + e.what());
  }
}

std::string checkpoint_json(const Checkpoint& c) { return dump(to_j(c)); }
std::string repack_json(const Repack& r) { return dump(to_j(r)); }
std::string combo_json(const Combo& c) { return dump(to_j(c)); }

std::string list_json(const std::vector<Checkpoint>& checkpoints, const std::vector<Repack>& repacks) {
  return dump(json{{"checkpoints", array_of(checkpoints)}, {"repacks", array_of(repacks)}});
}

std::string show_json(const Checkpoint& checkpoint, const std::vector<Repack>& repacks) {
  return dump(json{{"checkpoint", to_j(checkpoint)}, {"repacks", array_of(repacks)}});
}

std::string combos_json(const std::vector<Combo>& combos) { return dump(json{{"combos", array_of(combos)}}); }

std::string check_json(const ComboKey& key, Verdict verdict, const std::optional<Combo>& row) {
  return dump(json{{"family", key.family},
                   {"quant", key.quant},
                   {"drafter", key.drafter},
                   {"arch", key.arch},
                   {"verdict", to_string(verdict)},
                   {"combo", row ? to_j(*row) : json(nullptr)}});
}

std::string import_report_json(const ImportReport& r) {
  return dump(json{{"version", r.version},
                   {"inserted", r.inserted},
                   {"updated", r.updated},
                   {"kept_local", r.kept_local},
                   {"removed", r.removed},
                   {"skipped", r.skipped}});
}

std::string evidence_summary(std::string_view evidence_json) {
  try {
    return summarize(evidence_json);
  } catch (const std::exception&) {  // odd member types: no summary rather than a throw
    return "";
  }
}

}  // namespace memra::registry
