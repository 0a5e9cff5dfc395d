#include "host/server/response_store.hpp"

namespace memra::server {

ResponseStore::ResponseStore(std::size_t max_entries, std::size_t max_bytes)
    : max_entries_(max_entries), max_bytes_(max_bytes) {}

void ResponseStore::put(const std::string& tenant, const std::string& id, std::string conversation, std::string response) {
  std::lock_guard<std::mutex> lock(mu_);
  Tenant& t = tenants_[tenant];
  if (auto it = t.by_id.find(id); it != t.by_id.end()) {
    t.bytes -= it->second->bytes();
    t.lru.erase(it->second);
    t.by_id.erase(it);
  }
  Entry e{id, std::move(conversation), std::move(response)};
  if (max_entries_ == 0 || e.bytes() > max_bytes_) return;
  t.bytes += e.bytes();
  t.lru.push_front(std::move(e));
  t.by_id[id] = t.lru.begin();
  while (t.lru.size() > max_entries_ || t.bytes > max_bytes_) {
    const Entry& last = t.lru.back();
    t.bytes -= last.bytes();
    t.by_id.erase(last.id);
    t.lru.pop_back();
  }
}

const ResponseStore::Entry* ResponseStore::find_locked(const std::string& tenant, const std::string& id) {
  auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return nullptr;
  auto it = t->second.by_id.find(id);
  if (it == t->second.by_id.end()) return nullptr;
  t->second.lru.splice(t->second.lru.begin(), t->second.lru, it->second);
  return &*it->second;
}

std::optional<std::string> ResponseStore::get(const std::string& tenant, const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry* e = find_locked(tenant, id);
  return e ? std::optional<std::string>(e->conversation) : std::nullopt;
}

std::optional<std::string> ResponseStore::response(const std::string& tenant, const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry* e = find_locked(tenant, id);
  return e ? std::optional<std::string>(e->response) : std::nullopt;
}

bool ResponseStore::erase(const std::string& tenant, const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return false;
  auto it = t->second.by_id.find(id);
  if (it == t->second.by_id.end()) return false;
  t->second.bytes -= it->second->bytes();
  t->second.lru.erase(it->second);
  t->second.by_id.erase(it);
  return true;
}

std::size_t ResponseStore::entries(const std::string& tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto t = tenants_.find(tenant);
  return t == tenants_.end() ? 0 : t->second.lru.size();
}

std::size_t ResponseStore::bytes(const std::string& tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto t = tenants_.find(tenant);
  return t == tenants_.end() ? 0 : t->second.bytes;
}

}  // namespace memra::server
