#include "repack/format/gguf_vocab_file.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace memra::format {
namespace {

using json = nlohmann::ordered_json;

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += n;
  }
  return true;
}

std::string to_hex(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) out += {kHex[c >> 4], kHex[c & 15]};
  return out;
}

bool from_hex(const std::string& h, std::string* out) {
  if (h.size() % 2) return false;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out->clear();
  for (size_t i = 0; i < h.size(); i += 2) {
    const int a = nib(h[i]), b = nib(h[i + 1]);
    if (a < 0 || b < 0) return false;
    out->push_back(static_cast<char>(a * 16 + b));
  }
  return true;
}

json string_or_hex(const std::string& s) { return valid_utf8(s) ? json(s) : json{{"hex", to_hex(s)}}; }

Error bad(const std::string& what) {
  return make_error(ErrorCode::corrupt, std::string(kGgufTokenizerFile) + ": " + what + "; repack the model with memra-repack");
}

Result<std::vector<std::string>> strings_of(const json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end()) return out;
  if (!it->is_array()) return bad(std::string("'") + key + "' is not an array");
  out.reserve(it->size());
  for (const json& e : *it) {
    if (e.is_string()) {
      out.push_back(e.get<std::string>());
    } else if (e.is_object() && e.contains("hex") && e["hex"].is_string()) {
      std::string s;
      if (!from_hex(e["hex"].get<std::string>(), &s)) return bad(std::string("bad hex string in '") + key + "'");
      out.push_back(std::move(s));
    } else {
      return bad(std::string("'") + key + "' holds something other than strings");
    }
  }
  return out;
}

}  // namespace

std::string gguf_tokenizer_to_json(const gguf::EmbeddedTokenizer& t) {
  json j;
  j["model"] = t.model;
  j["pre"] = t.pre;
  json tokens = json::array();
  for (const std::string& s : t.tokens) tokens.push_back(string_or_hex(s));
  j["tokens"] = std::move(tokens);
  j["scores"] = t.scores;
  j["token_type"] = t.token_types;
  json merges = json::array();
  for (const std::string& s : t.merges) merges.push_back(string_or_hex(s));
  j["merges"] = std::move(merges);
  auto opt_id = [&](const char* k, const std::optional<int64_t>& v) {
    if (v) j[k] = *v;
  };
  opt_id("bos_token_id", t.bos_id);
  opt_id("eos_token_id", t.eos_id);
  opt_id("eot_token_id", t.eot_id);
  opt_id("eom_token_id", t.eom_id);
  opt_id("unknown_token_id", t.unk_id);
  opt_id("seperator_token_id", t.sep_id);  // llama.cpp's spelling of the GGUF key
  opt_id("padding_token_id", t.pad_id);
  opt_id("mask_token_id", t.mask_id);
  auto opt_bool = [&](const char* k, const std::optional<bool>& v) {
    if (v) j[k] = *v;
  };
  opt_bool("add_bos_token", t.add_bos);
  opt_bool("add_eos_token", t.add_eos);
  opt_bool("add_space_prefix", t.add_space_prefix);
  j["chat_template"] = t.chat_template;
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<gguf::EmbeddedTokenizer> gguf_tokenizer_from_json(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  gguf::EmbeddedTokenizer t;
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
  t.model = str("model");
  t.pre = str("pre");
  t.chat_template = str("chat_template");
  auto tokens = strings_of(j, "tokens");
  if (!tokens) return tokens.error();
  t.tokens = std::move(*tokens);
  auto merges = strings_of(j, "merges");
  if (!merges) return merges.error();
  t.merges = std::move(*merges);
  if (auto it = j.find("scores"); it != j.end()) {
    if (!it->is_array()) return bad("'scores' is not an array");
    for (const json& v : *it) {
      if (!v.is_number()) return bad("'scores' holds a non-number");
      t.scores.push_back(v.get<float>());
    }
  }
  if (auto it = j.find("token_type"); it != j.end()) {
    if (!it->is_array()) return bad("'token_type' is not an array");
    for (const json& v : *it) {
      if (!v.is_number_integer()) return bad("'token_type' holds a non-integer");
      t.token_types.push_back(v.get<int32_t>());
    }
  }
  if (!t.scores.empty() && t.scores.size() != t.tokens.size()) return bad("'scores' and 'tokens' differ in length");
  if (!t.token_types.empty() && t.token_types.size() != t.tokens.size()) return bad("'token_type' and 'tokens' differ in length");
  auto id = [&](const char* k, std::optional<int64_t>* out) -> Status {
    auto it = j.find(k);
    if (it == j.end()) return {};
    if (!it->is_number_integer()) return bad(std::string("'") + k + "' is not an integer");
    const auto v = it->get<int64_t>();
    if (v < 0 || static_cast<uint64_t>(v) >= t.tokens.size()) return bad(std::string("'") + k + "' is outside the vocabulary");
    *out = v;
    return {};
  };
  MEMRA_TRY(id("bos_token_id", &t.bos_id));
  MEMRA_TRY(id("eos_token_id", &t.eos_id));
  MEMRA_TRY(id("eot_token_id", &t.eot_id));
  MEMRA_TRY(id("eom_token_id", &t.eom_id));
  MEMRA_TRY(id("unknown_token_id", &t.unk_id));
  MEMRA_TRY(id("seperator_token_id", &t.sep_id));
  MEMRA_TRY(id("padding_token_id", &t.pad_id));
  MEMRA_TRY(id("mask_token_id", &t.mask_id));
  auto flag = [&](const char* k, std::optional<bool>* out) {
    if (j.contains(k) && j[k].is_boolean()) *out = j[k].get<bool>();
  };
  flag("add_bos_token", &t.add_bos);
  flag("add_eos_token", &t.add_eos);
  flag("add_space_prefix", &t.add_space_prefix);
  return t;
}

Result<gguf::EmbeddedTokenizer> read_gguf_tokenizer(const std::filesystem::path& dir) {
  const auto p = dir / kGgufTokenizerFile;
  std::ifstream in(p, std::ios::binary);
  if (!in) return make_error(ErrorCode::not_found, p.string() + " is missing; this .memra directory has no GGUF vocabulary");
  std::stringstream ss;
  ss << in.rdbuf();
  return gguf_tokenizer_from_json(ss.str());
}

}  // namespace memra::format
