#include "host/server/api_keys.hpp"

#include <algorithm>

#include <Poco/DigestEngine.h>
#include <Poco/SHA2Engine.h>

#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace memra::server {
namespace {

using nlohmann::json;

std::vector<unsigned char> sha256_digest(std::string_view text) {
  Poco::SHA2Engine engine(Poco::SHA2Engine::SHA_256);
  engine.update(text.data(), static_cast<unsigned>(text.size()));
  return engine.digest();
}

bool is_hex_digest(const std::string& text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// "keys[2] (tenant "acme")" — how errors name an entry.
std::string entry_name(std::size_t index, const json& entry) {
  std::string name = "keys[" + std::to_string(index) + "]";
  if (entry.is_object()) {
    auto it = entry.find("tenant");
    if (it != entry.end() && it->is_string()) name += " (tenant \"" + it->get<std::string>() + "\")";
  }
  return name;
}

Error file_error(std::string_view source, const std::string& what) {
  return make_error(ErrorCode::invalid_argument,
                    "API key file " + std::string(source) + ": " + what +
                        " (format: docs/SERVING.md; make a digest with memra-host --hash-key KEY)");
}

Result<TenantLimits> parse_limits(const json& limits, const std::string& where, std::string_view source) {
  TenantLimits out;
  if (!limits.is_object()) return file_error(source, where + ": \"limits\" must be an object");
  for (const auto& [name, value] : limits.items()) {
    std::int64_t* field = nullptr;
    std::int64_t minimum = 0;
    if (name == "max_concurrent") field = &out.max_concurrent;
    else if (name == "max_kv_tokens") field = &out.max_kv_tokens;
    else if (name == "queue_timeout_ms") field = &out.queue_timeout_ms;
    else if (name == "priority") { field = &out.priority; minimum = INT64_MIN; }
    else {
      return file_error(source, where + ": unknown limit \"" + name +
                                    "\" (known: max_concurrent, max_kv_tokens, queue_timeout_ms, priority)");
    }
    if (!value.is_number_integer()) {
      return file_error(source, where + ": limits." + name + " must be an integer");
    }
    const auto number = value.get<std::int64_t>();
    if (number < minimum) return file_error(source, where + ": limits." + name + " must be >= 0");
    *field = number;
  }
  return out;
}

Result<ApiKey> parse_entry(const json& entry, std::size_t index, std::string_view source) {
  const std::string where = entry_name(index, entry);
  if (!entry.is_object()) return file_error(source, where + " must be an object");
  ApiKey key;
  key.index = index;
  bool have_digest = false;
  for (const auto& [name, value] : entry.items()) {
    if (name == "sha256") {
      if (!value.is_string() || !is_hex_digest(value.get<std::string>())) {
        return file_error(source, where + ": \"sha256\" must be 64 hex digits (the sha256 of the key, not the key)");
      }
      key.digest = Poco::DigestEngine::digestFromHex(lower(value.get<std::string>()));
      have_digest = true;
    } else if (name == "tenant") {
      if (!value.is_string() || value.get<std::string>().empty()) {
        return file_error(source, where + ": \"tenant\" must be a non-empty string");
      }
      // A tenant name goes into log lines and metric labels: no control characters
      // (a newline would forge a log line).
      const std::string& t = value.get<std::string>();
      if (std::any_of(t.begin(), t.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
        return file_error(source, where + ": \"tenant\" must not contain control characters (newlines, tabs, ...)");
      key.tenant = t;
    } else if (name == "disabled") {
      if (!value.is_boolean()) return file_error(source, where + ": \"disabled\" must be true or false");
      key.disabled = value.get<bool>();
    } else if (name == "metrics") {
      if (!value.is_boolean()) return file_error(source, where + ": \"metrics\" must be true or false");
      key.metrics_all = value.get<bool>();
    } else if (name == "limits") {
      auto limits = parse_limits(value, where, source);
      if (!limits) return limits.error();
      key.limits = *limits;
    } else {
      return file_error(source, where + ": unknown field \"" + name +
                                    "\" (known: sha256, tenant, disabled, metrics, limits)");
    }
  }
  if (!have_digest) return file_error(source, where + ": \"sha256\" is missing");
  if (key.tenant.empty()) return file_error(source, where + ": \"tenant\" is missing");
  return key;
}

}  // namespace

std::string sha256_hex(std::string_view text) {
  return Poco::DigestEngine::digestToHex(sha256_digest(text));
}

std::optional<std::string> bearer_token(std::string_view authorization) {
  constexpr std::string_view scheme = "bearer";
  if (authorization.size() <= scheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i]) return std::nullopt;
  }
  std::string_view rest = authorization.substr(scheme.size());
  if (rest.front() != ' ' && rest.front() != '\t') return std::nullopt;
  const auto begin = rest.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return std::nullopt;
  const auto end = rest.find_last_not_of(" \t\r\n");
  return std::string(rest.substr(begin, end - begin + 1));
}

Result<KeyStore> KeyStore::load_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_error(ErrorCode::not_found,
                      "cannot open the API key file " + path.string() +
                          "; check the path given to --api-keys / MEMRA_API_KEYS");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path.string());
}

Result<KeyStore> KeyStore::parse(std::string_view json_text, std::string_view source) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    return file_error(source, std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) return file_error(source, "the top level must be an object {\"keys\":[...]}");
  for (const auto& [name, value] : doc.items()) {
    if (name != "keys") return file_error(source, "unknown top-level field \"" + name + "\" (known: keys)");
  }
  auto keys = doc.find("keys");
  if (keys == doc.end() || !keys->is_array()) return file_error(source, "\"keys\" must be an array");
  if (keys->empty()) {
    return file_error(source, "\"keys\" is empty, so no client could authenticate; add a key or drop --api-keys");
  }
  KeyStore store;
  std::map<std::vector<unsigned char>, std::size_t> seen;
  for (std::size_t i = 0; i < keys->size(); ++i) {
    auto key = parse_entry((*keys)[i], i, source);
    if (!key) return key.error();
    auto [it, inserted] = seen.emplace(key->digest, i);
    if (!inserted) {
      return file_error(source, entry_name(i, (*keys)[i]) + " has the same sha256 as " +
                                    entry_name(it->second, (*keys)[it->second]) + "; each key must be listed once");
    }
    store.keys_.push_back(std::move(*key));
  }
  return store;
}

AuthResult KeyStore::check_key(std::string_view presented_key) const {
  const auto digest = sha256_digest(presented_key);
  // Compare against every entry without stopping at a match, each comparison in
  // constant time, so the response time does not depend on the key's bytes.
  const ApiKey* match = nullptr;
  for (const auto& key : keys_) {
    const bool equal = Poco::DigestEngine::constantTimeEquals(digest, key.digest);
    if (equal) match = &key;
  }
  if (match == nullptr) return {AuthOutcome::unknown, nullptr};
  return {match->disabled ? AuthOutcome::disabled : AuthOutcome::ok, match};
}

AuthResult KeyStore::authenticate(std::string_view authorization_header) const {
  auto token = bearer_token(authorization_header);
  if (!token) return {AuthOutcome::missing, nullptr};
  return check_key(*token);
}

std::size_t KeyStore::enabled_count() const {
  std::size_t count = 0;
  for (const auto& key : keys_) count += key.disabled ? 0 : 1;
  return count;
}

}  // namespace memra::server
