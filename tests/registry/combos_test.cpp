// Combos: the shipped file, versioned re-import, verdicts, gate evidence, user imports.
#include <gtest/gtest.h>

#include "registry/registry.hpp"
#include "tests/registry/test_util.hpp"

namespace memra::registry {
namespace {

using test::raw_query;
using test::sql_on_text;
using test::TempDir;

// One combos document; entries are "family|quant|drafter|arch|verdict".
std::string combos_doc(int version, const std::vector<std::string>& entries) {
  std::string doc = R"({"format":"memra-combos","version":)" + std::to_string(version) + R"(,"combos":[)";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::vector<std::string> f;
    std::string rest = entries[i];
    for (std::size_t p; (p = rest.find('|')) != std::string::npos; rest = rest.substr(p + 1)) f.push_back(rest.substr(0, p));
    f.push_back(rest);
    doc += std::string(i ? "," : "") + R"({"family":")" + f[0] + R"(","quant":")" + f[1] + R"(","drafter":")" + f[2] +
           R"(","arch":")" + f[3] + R"(","verdict":")" + f[4] + R"(","evidence":{"notes":"v)" +
           std::to_string(version) + R"("}})";
  }
  return doc + "]}";
}

// The registry's combos as "family|quant|drafter|arch|verdict|source".
std::vector<std::string> rows_of(const Registry& reg) {
  std::vector<std::string> out;
  auto combos = reg.combos();
  EXPECT_TRUE(combos.ok());
  if (!combos.ok()) return out;
  for (const auto& c : *combos)
    out.push_back(c.key.family + "|" + c.key.quant + "|" + c.key.drafter + "|" + c.key.arch + "|" +
                  to_string(c.verdict) + "|" + c.source);
  return out;
}

Registry open_with(const std::filesystem::path& path, std::optional<std::string> shipped) {
  OpenOptions o;
  o.shipped_combos_json = std::move(shipped);
  auto r = Registry::open(path, o);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return std::move(*r);
}

TEST(RegistryCombos, EmbeddedShippedFileIsTheSourceFile) {
  EXPECT_EQ(std::string(shipped_combos_json()), test::read_file(MEMRA_COMBOS_FILE));
}

TEST(RegistryCombos, ShippedCombosAreImportedOnFirstOpen) {
  TempDir dir;
  auto reg = Registry::open(dir / "registry.db");
  ASSERT_TRUE(reg.ok()) << reg.error().message;
  // Read the shipped file with sqlite's JSON functions (an independent parser).
  std::string text = test::read_file(MEMRA_COMBOS_FILE);
  auto version = sql_on_text("SELECT json_extract(?1, '$.version')", text);
  ASSERT_EQ(version.size(), 1u);
  auto expected = sql_on_text(
      "SELECT json_extract(value,'$.family') || '|' || json_extract(value,'$.quant') || '|' || "
      "coalesce(json_extract(value,'$.drafter'),'') || '|' || json_extract(value,'$.arch') || '|' || "
      "json_extract(value,'$.verdict') || '|shipped:v" + version[0] + "' AS r FROM json_each(?1, '$.combos') ORDER BY r",
      text);
  ASSERT_FALSE(expected.empty());
  auto actual = rows_of(*reg);
  std::sort(actual.begin(), actual.end());
  EXPECT_EQ(actual, expected);
  EXPECT_EQ(std::to_string(*reg->shipped_combos_version()), version[0]);
  // Evidence is stored as the file has it (member order kept).
  auto evidence = sql_on_text("SELECT json(json_extract(value,'$.evidence')) FROM json_each(?1, '$.combos')", text);
  auto combos = reg->combos();
  std::vector<std::string> stored;
  for (const auto& c : *combos) stored.push_back(c.evidence_json);
  std::sort(evidence.begin(), evidence.end());
  std::sort(stored.begin(), stored.end());
  EXPECT_EQ(stored, evidence);
}

TEST(RegistryCombos, ShippedCombosAreImportedExactlyOnce) {
  TempDir dir;
  auto path = dir / "registry.db";
  std::string v1 = combos_doc(1, {"llama|f32||cpu|generic", "llama|bf16||cpu|generic", "llama|nvfp4||sm_90a|rejected"});
  { open_with(path, v1); }
  test::raw_exec(path, "DELETE FROM combos WHERE quant='f32'; UPDATE combos SET verdict='supported' WHERE quant='bf16'");
  auto reg = open_with(path, v1);
  EXPECT_EQ(rows_of(reg), (std::vector<std::string>{"llama|bf16||cpu|supported|shipped:v1",
                                                      "llama|nvfp4||sm_90a|rejected|shipped:v1"}));
  auto again = reg.import_shipped(v1);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->skipped);
}

TEST(RegistryCombos, ShippedCombosAreReimportedWhenTheirVersionIsNewer) {
  TempDir dir;
  auto path = dir / "registry.db";
  auto reg = open_with(path, combos_doc(1, {"llama|f32||cpu|generic", "llama|bf16||cpu|generic",
                                            "llama|fp8||sm_120a|rejected"}));
  // Local evidence on bf16, and a user import naming q8_0.
  GateRecord g;
  g.key = {"llama", "bf16", "", "cpu"};
  g.gate = "oracle-logits";
  g.pass = true;
  ASSERT_TRUE(reg.record_gate(g).ok());
  test::write_file(dir / "mine.json", combos_doc(5, {"llama|q8_0||cpu|supported"}));
  ASSERT_TRUE(reg.import_combos(dir / "mine.json").ok());

  auto report = reg.import_shipped(combos_doc(2, {"llama|f32||cpu|supported", "llama|bf16||cpu|rejected",
                                                  "llama|q8_0||cpu|rejected", "llama|q6_k||cpu|generic"}));
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_FALSE(report->skipped);
  EXPECT_EQ(report->version, 2);
  EXPECT_EQ(report->inserted, 1u);    // q6_k
  EXPECT_EQ(report->updated, 1u);     // f32
  EXPECT_EQ(report->kept_local, 2u);  // bf16 (gate), q8_0 (import)
  EXPECT_EQ(report->removed, 1u);     // fp8: v2 no longer lists it
  EXPECT_EQ(rows_of(reg), (std::vector<std::string>{"llama|bf16||cpu|generic|gate",
                                                     "llama|f32||cpu|supported|shipped:v2",
                                                     "llama|q6_k||cpu|generic|shipped:v2",
                                                     "llama|q8_0||cpu|supported|import:v5"}));
  EXPECT_EQ(*reg.shipped_combos_version(), 2);
  auto f32 = reg.find_combo({"llama", "f32", "", "cpu"});
  EXPECT_EQ((**f32).evidence_json, R"({"notes":"v2"})");

  // An older shipped file (a downgraded binary) changes nothing.
  auto before = rows_of(reg);
  auto old = reg.import_shipped(combos_doc(1, {"llama|f32||cpu|generic"}));
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(old->skipped);
  EXPECT_EQ(rows_of(reg), before);

  // Opening with a newer shipped file imports it.
  auto reopened = open_with(path, combos_doc(3, {"llama|f32||cpu|generic"}));
  EXPECT_EQ(*reopened.shipped_combos_version(), 3);
  EXPECT_EQ(*reopened.check({"llama", "f32", "", "cpu"}), Verdict::generic);
  EXPECT_FALSE(reopened.find_combo({"llama", "q6_k", "", "cpu"})->has_value());
}

TEST(RegistryCombos, CheckGivesTheVerdictAndGenericWithoutARow) {
  TempDir dir;
  auto reg = open_with(dir / "registry.db", combos_doc(1, {"llama|q4_k||sm_90a|supported",
                                                           "llama|q4_k|llama-draft|sm_90a|rejected",
                                                           "llama|q4_0||cpu|generic"}));
  EXPECT_EQ(*reg.check({"llama", "q4_k", "", "sm_90a"}), Verdict::supported);
  EXPECT_EQ(*reg.check({"llama", "q4_k", "llama-draft", "sm_90a"}), Verdict::rejected);
  EXPECT_EQ(*reg.check({"llama", "q4_0", "", "cpu"}), Verdict::generic);
  // No row: not verified, not rejected.
  EXPECT_EQ(*reg.check({"llama", "q4_k", "", "sm_120a"}), Verdict::generic);
  EXPECT_EQ(*reg.check({"qwen3", "q4_k", "", "sm_90a"}), Verdict::generic);
  EXPECT_FALSE(reg.find_combo({"qwen3", "q4_k", "", "sm_90a"})->has_value());

  auto bad_arch = reg.check({"llama", "q4_k", "", "sm_80"});
  ASSERT_FALSE(bad_arch.ok());
  EXPECT_EQ(bad_arch.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(bad_arch.error().message.find("sm_80"), std::string::npos);

  auto filtered = reg.combos({"sm_90a", "", ""});
  ASSERT_TRUE(filtered.ok());
  EXPECT_EQ(filtered->size(), 2u);
  EXPECT_EQ(reg.combos({"", "llama", "q4_0"})->size(), 1u);
  EXPECT_EQ(reg.combos({"cpu", "qwen3", ""})->size(), 0u);
}

TEST(RegistryCombos, RecordGateAppendsEvidence) {
  TempDir dir;
  auto path = dir / "registry.db";
  auto reg = open_with(path, combos_doc(1, {"llama|q4_k||cpu|generic"}));
  GateRecord g;
  g.key = {"llama", "q4_k", "", "cpu"};
  g.gate = "oracle-logits";
  g.pass = true;
  g.note = "max abs err 1e-3";
  auto first = reg.record_gate(g);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->verdict, Verdict::generic);
  EXPECT_EQ(first->source, "gate");
  g.gate = "bench-decode";
  g.pass = false;
  g.tok_s = 12.5;
  g.note = "";
  g.verdict = Verdict::supported;
  auto second = reg.record_gate(g);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second->verdict, Verdict::supported);

  // Read the evidence back with sqlite's JSON functions.
  std::string sel = "SELECT json_extract(evidence,'$.notes'), json_array_length(evidence,'$.gates'), "
                    "json_extract(evidence,'$.gates[0].gate'), json_extract(evidence,'$.gates[0].result'), "
                    "json_extract(evidence,'$.gates[0].note'), json_type(evidence,'$.gates[0].tok_s'), "
                    "json_extract(evidence,'$.gates[1].gate'), json_extract(evidence,'$.gates[1].result'), "
                    "json_extract(evidence,'$.gates[1].tok_s'), json_extract(evidence,'$.gates[1].verdict'), "
                    "json_extract(evidence,'$.gates[1].at') IS NOT NULL, verdict, source "
                    "FROM combos WHERE quant='q4_k'";
  EXPECT_EQ(raw_query(path, sel), std::vector<std::string>{
                                      "v1|2|oracle-logits|pass|max abs err 1e-3|NULL|bench-decode|fail|12.5|"
                                      "supported|1|supported|gate"});

  // A gate on a combo without a row creates it as generic.
  GateRecord fresh;
  fresh.key = {"llama", "q6_k", "tiny-draft", "sm_120a"};
  fresh.gate = "oracle-logits";
  fresh.pass = true;
  auto created = reg.record_gate(fresh);
  ASSERT_TRUE(created.ok()) << created.error().message;
  EXPECT_EQ(created->verdict, Verdict::generic);
  EXPECT_EQ(raw_query(path, "SELECT json_array_length(evidence,'$.gates') FROM combos WHERE quant='q6_k'"),
            std::vector<std::string>{"1"});

  GateRecord bad = fresh;
  bad.gate = "two words";
  EXPECT_EQ(reg.record_gate(bad).error().code, ErrorCode::invalid_argument);
  bad = fresh;
  bad.tok_s = -1;
  EXPECT_EQ(reg.record_gate(bad).error().code, ErrorCode::invalid_argument);
}

TEST(RegistryCombos, ImportKeepsLocalGateEvidenceUnlessForced) {
  TempDir dir;
  auto reg = open_with(dir / "registry.db", combos_doc(1, {}));
  GateRecord g;
  g.key = {"llama", "q4_k", "", "cpu"};
  g.gate = "oracle-logits";
  g.pass = true;
  g.verdict = Verdict::supported;
  ASSERT_TRUE(reg.record_gate(g).ok());
  test::write_file(dir / "c.json", combos_doc(4, {"llama|q4_k||cpu|rejected", "llama|q5_k||cpu|generic"}));
  auto report = reg.import_combos(dir / "c.json");
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->inserted, 1u);
  EXPECT_EQ(report->kept_local, 1u);
  EXPECT_EQ(*reg.check(g.key), Verdict::supported);
  ImportOptions force;
  force.overwrite_local = true;
  report = reg.import_combos(dir / "c.json", force);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->updated, 2u);
  EXPECT_EQ(*reg.check(g.key), Verdict::rejected);
  EXPECT_EQ((**reg.find_combo(g.key)).source, "import:v4");
}

TEST(RegistryCombos, ImportRejectsMalformedFilesNamingThem) {
  TempDir dir;
  auto reg = open_with(dir / "registry.db", combos_doc(1, {}));
  struct Case {
    std::string text;
    std::string mentions;
  };
  std::vector<Case> cases = {
      {"{not json", "not valid JSON"},
      {R"({"format":"other","version":1,"combos":[]})", "format"},
      {R"({"format":"memra-combos","version":0,"combos":[]})", "version"},
      {R"({"format":"memra-combos","version":1})", "combos"},
      {combos_doc(1, {"llama|q4_k||sm_80|supported"}), "sm_80"},
      {combos_doc(1, {"llama|q4_k||cpu|maybe"}), "maybe"},
      {combos_doc(1, {"llama|q4_k||cpu|generic", "llama|q4_k||cpu|rejected"}), "duplicate"},
      {R"({"format":"memra-combos","version":1,"combos":[{"family":"llama","quant":"q4_k","arch":"cpu","verdict":"generic","evidence":{"gates":{}}}]})",
       "gates"},
      {R"({"format":"memra-combos","version":1,"combos":[{"family":"llama","quant":"q4_k","arch":"cpu","verdict":"generic","extra":1}]})",
       "extra"},
  };
  for (const auto& c : cases) {
    test::write_file(dir / "bad.json", c.text);
    auto r = reg.import_combos(dir / "bad.json");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.error().code, ErrorCode::invalid_argument) << c.text;
    EXPECT_NE(r.error().message.find((dir / "bad.json").string()), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(c.mentions), std::string::npos) << r.error().message;
  }
  EXPECT_TRUE(reg.combos()->empty());
  auto missing = reg.import_combos(dir / "nope.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::not_found);
}

}  // namespace
}  // namespace memra::registry
