// Combos: the (family, quant, drafter, arch) → verdict table and its gate evidence.
#include <cmath>

#include "registry/impl.hpp"

namespace memra::registry {
namespace {

constexpr std::string_view kComboColumns = "family, quant, drafter, arch, verdict, evidence, source, updated_at";
constexpr std::string_view kKeyWhere = "family = ?1 AND quant = ?2 AND drafter = ?3 AND arch = ?4";

Combo read_combo(const sql::Stmt& s) {
  Combo c;
  c.key = {s.text(0), s.text(1), s.text(2), s.text(3)};
  auto verdict = parse_verdict(s.text(4));
  c.verdict = verdict.ok() ? *verdict : Verdict::generic;  // the schema CHECK keeps it valid
  c.evidence_json = s.text(5);
  c.source = s.text(6);
  c.updated_at = s.text(7);
  return c;
}

void bind_key(sql::Stmt& s, const ComboKey& key) {
  s.bind(1, key.family).bind(2, key.quant).bind(3, key.drafter).bind(4, key.arch);
}

Result<std::optional<Combo>> select_combo(sql::Db& db, const ComboKey& key) {
  auto stmt = sql::Stmt::prepare(db, "SELECT " + std::string(kComboColumns) + " FROM combos WHERE " +
                                         std::string(kKeyWhere));
  if (!stmt.ok()) return stmt.error();
  bind_key(*stmt, key);
  auto row = stmt->step();
  if (!row.ok()) return row.error();
  if (!*row) return std::optional<Combo>();
  return std::optional<Combo>(read_combo(*stmt));
}

bool printable_token(std::string_view s) {
  for (char ch : s) {
    auto u = static_cast<unsigned char>(ch);
    if (u <= 0x20 || u == 0x7f) return false;
  }
  return true;
}

}  // namespace

Status validate_name(std::string_view what, std::string_view value) {
  bool ok = !value.empty() && value.size() <= 64;
  for (std::size_t i = 0; ok && i < value.size(); ++i) {
    char ch = value[i];
    bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
    ok = alnum || (i > 0 && (ch == '_' || ch == '-' || ch == '.' || ch == '+'));
  }
  if (ok) return {};
  return make_error(ErrorCode::invalid_argument,
                    "invalid " + std::string(what) + " '" + std::string(value) +
                        "': use a lower-case name of letters, digits and _ - . + (e.g. 'llama', 'q4_k')");
}

Status validate_key(const ComboKey& key) {
  MEMRA_TRY(validate_name("family", key.family));
  MEMRA_TRY(validate_name("quant", key.quant));
  if (key.drafter.size() > 256 || !printable_token(key.drafter))
    return make_error(ErrorCode::invalid_argument,
                      "invalid drafter '" + key.drafter + "': use a name without spaces, or '' for none");
  if (!is_known_arch(key.arch)) {
    std::string known;
    for (const auto& a : known_arches()) known += (known.empty() ? "" : ", ") + a;
    return make_error(ErrorCode::invalid_argument, "unknown arch '" + key.arch + "'; use one of " + known);
  }
  return {};
}

Result<std::vector<Combo>> Registry::combos(const ComboFilter& filter) const {
  std::lock_guard lock(impl_->mu);
  // Empty filter fields match everything.
  auto stmt = sql::Stmt::prepare(impl_->db, "SELECT " + std::string(kComboColumns) +
                                                " FROM combos WHERE (?1 = '' OR arch = ?1) AND (?2 = '' OR family = ?2)"
                                                " AND (?3 = '' OR quant = ?3) ORDER BY family, quant, drafter, arch");
  if (!stmt.ok()) return stmt.error();
  stmt->bind(1, filter.arch).bind(2, filter.family).bind(3, filter.quant);
  std::vector<Combo> rows;
  for (;;) {
    auto more = stmt->step();
    if (!more.ok()) return more.error();
    if (!*more) return rows;
    rows.push_back(read_combo(*stmt));
  }
}

Result<std::optional<Combo>> Registry::find_combo(const ComboKey& key) const {
  MEMRA_TRY(validate_key(key));
  std::lock_guard lock(impl_->mu);
  return select_combo(impl_->db, key);
}

Result<Verdict> Registry::check(const ComboKey& key) const {
  auto row = find_combo(key);
  if (!row.ok()) return row.error();
  // No row: nobody verified it and nobody rejected it.
  return *row ? (*row)->verdict : Verdict::generic;
}

Result<Combo> Registry::record_gate(const GateRecord& record) {
  MEMRA_TRY(validate_key(record.key));
  if (record.gate.empty() || record.gate.size() > 64 || !printable_token(record.gate))
    return make_error(ErrorCode::invalid_argument,
                      "invalid gate name '" + record.gate + "': use a short name without spaces, e.g. 'oracle-logits'");
  if (record.tok_s && (!std::isfinite(*record.tok_s) || *record.tok_s < 0))
    return make_error(ErrorCode::invalid_argument, "tok/s must be a finite number >= 0");

  std::lock_guard lock(impl_->mu);
  sql::Db& db = impl_->db;
  auto tx = sql::Transaction::begin(db);
  if (!tx.ok()) return tx.error();

  std::string now(kNowSql);
  auto insert = sql::Stmt::prepare(db, "INSERT INTO combos(family, quant, drafter, arch, verdict, evidence, source, "
                                       "updated_at) VALUES (?1, ?2, ?3, ?4, 'generic', '{}', 'gate', " + now +
                                       ") ON CONFLICT DO NOTHING");
  if (!insert.ok()) return insert.error();
  bind_key(*insert, record.key);
  MEMRA_TRY(insert->run());

  // The append happens in SQL (json_insert '$.gates[#]'), inside the write
  // transaction, so concurrent writers never overwrite each other's entries.
  // json_patch drops the null members (tok_s, verdict when not given).
  std::string q =
      "UPDATE combos SET evidence = json_insert("
      "  CASE WHEN json_type(evidence, '$.gates') = 'array' THEN evidence"
      "       ELSE json_set(evidence, '$.gates', json_array()) END,"
      "  '$.gates[#]',"
      "  json_patch(json_object('gate', ?5, 'result', ?6, 'note', ?7, 'at', " + now + "),"
      "             json_object('tok_s', ?8, 'verdict', ?9))),"
      " verdict = coalesce(?9, verdict), source = 'gate', updated_at = " + now +
      " WHERE " + std::string(kKeyWhere);
  auto update = sql::Stmt::prepare(db, q);
  if (!update.ok()) return update.error();
  bind_key(*update, record.key);
  update->bind(5, record.gate)
      .bind(6, std::string_view(record.pass ? "pass" : "fail"))
      .bind(7, record.note)
      .bind(8, record.tok_s);
  if (record.verdict)
    update->bind(9, std::string_view(to_string(*record.verdict)));
  else
    update->bind_null(9);
  MEMRA_TRY(update->run());

  auto row = select_combo(db, record.key);
  if (!row.ok()) return row.error();
  if (!*row) return make_error(ErrorCode::internal, "record_gate: the combo row vanished");
  MEMRA_TRY(tx->commit());
  return std::move(**row);
}

}  // namespace memra::registry
