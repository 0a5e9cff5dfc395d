// API keys: the key file memra-host loads with --api-keys, and bearer-token
// authentication against it.
//
// File format (docs/SERVING.md):
//   {"keys":[{"sha256":"<64 hex: sha256 of the key>","tenant":"acme","disabled":false,
//             "limits":{"max_concurrent":8,"max_kv_tokens":65536,"queue_timeout_ms":30000,
//                       "priority":0}}]}
// Only digests are stored; a presented key is hashed and compared in constant
// time against every entry, so neither the file nor timing reveals keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"

namespace memra::server {

// Per-tenant limits, enforced by TenantAdmission (admission.hpp) and, for the
// priority, the scheduler's queue; 0 means "no limit" for the counts.
struct TenantLimits {
  std::int64_t max_concurrent = 0;
  std::int64_t max_kv_tokens = 0;
  std::int64_t queue_timeout_ms = 30000;
  std::int64_t priority = 0;
};

struct ApiKey {
  std::vector<unsigned char> digest;  // 32 bytes, sha256 of the key
  std::string tenant;
  bool disabled = false;
  bool metrics_all = false;  // "metrics": true — /metrics shows every tenant's series (a scraper's key)
  TenantLimits limits;
  std::size_t index = 0;  // position in the file's "keys" array (for logs)
};

enum class AuthOutcome { ok, missing, unknown, disabled };

struct AuthResult {
  AuthOutcome outcome = AuthOutcome::missing;
  const ApiKey* key = nullptr;  // set for ok and disabled
};

// Lower-case hex sha256 of `text` (what the key file stores; memra-host --hash-key).
std::string sha256_hex(std::string_view text);

// The token of an "Authorization: Bearer <token>" value (scheme case-insensitive),
// or nullopt when the value is not a bearer credential.
std::optional<std::string> bearer_token(std::string_view authorization);

class KeyStore {
 public:
  // Reads and validates a key file; errors name the file and the entry.
  static Result<KeyStore> load_file(const std::filesystem::path& path);
  // Validates key-file text; `source` names it in error messages.
  static Result<KeyStore> parse(std::string_view json_text, std::string_view source);

  // Checks a presented key (not a header) against every entry in constant time.
  AuthResult check_key(std::string_view presented_key) const;
  // Checks an Authorization header value; "" or a non-bearer value is `missing`.
  AuthResult authenticate(std::string_view authorization_header) const;

  const std::vector<ApiKey>& keys() const { return keys_; }
  std::size_t enabled_count() const;

 private:
  std::vector<ApiKey> keys_;
};

}  // namespace memra::server
