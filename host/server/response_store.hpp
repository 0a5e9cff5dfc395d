// The bounded in-memory store behind /v1/responses' previous_response_id and
// GET/DELETE /v1/responses/{id}: each stored response keeps its conversation (the chat
// messages up to and including its answer) and its Response object, keyed by tenant
// and id, so one tenant can never read another's.
// Each tenant's share is capped in entries and bytes; the least recently used
// response goes first. Nothing survives a restart.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace memra::server {

// What memra-host keeps per tenant (docs/SERVING.md, "/v1/responses").
inline constexpr std::size_t kStoredResponsesPerTenant = 256;
inline constexpr std::size_t kStoredResponseBytesPerTenant = std::size_t{16} << 20;

class ResponseStore {
 public:
  // Per tenant: at most `max_entries` responses and `max_bytes` of stored conversations.
  ResponseStore(std::size_t max_entries, std::size_t max_bytes);

  // Stores (or replaces) `id` for `tenant`; an entry larger than max_bytes is not kept.
  void put(const std::string& tenant, const std::string& id, std::string conversation, std::string response = {});
  // The conversation stored as `id` by `tenant` (and marks it used), or nullopt.
  std::optional<std::string> get(const std::string& tenant, const std::string& id);
  // The Response object stored as `id` by `tenant` (and marks it used), or nullopt.
  std::optional<std::string> response(const std::string& tenant, const std::string& id);
  // Removes `id` of `tenant`; false when there was none.
  bool erase(const std::string& tenant, const std::string& id);

  std::size_t entries(const std::string& tenant) const;
  std::size_t bytes(const std::string& tenant) const;

 private:
  struct Entry {
    std::string id, conversation, response;
    std::size_t bytes() const { return conversation.size() + response.size(); }
  };
  const Entry* find_locked(const std::string& tenant, const std::string& id);  // marks it used
  struct Tenant {
    std::list<Entry> lru;  // most recently used first
    std::unordered_map<std::string, std::list<Entry>::iterator> by_id;
    std::size_t bytes = 0;
  };
  std::size_t max_entries_, max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Tenant> tenants_;
};

}  // namespace memra::server
