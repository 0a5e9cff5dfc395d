// Shared plumbing of memra's built-in family plugins: the per-host plugin context,
// error reporting through it, the exception guard every exported body runs in, and
// the string buffer protocol of memra/family.h. Compiled into each family .so.
#pragma once

#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>
#include <new>
#include <stdexcept>
#include <string>

#include "memra/memra.h"

// One per memra_plugin_init: what a family plugin keeps for its host.
struct memra_plugin_ctx {
  const memra_host_api* host = nullptr;
  std::string plugin_name;
  // What the plugin's ops keep for this host until shutdown (kernel handles per backend,
  // memra-kernel-check's case buffers); guarded by `mu`.
  std::mutex mu;
  std::vector<std::shared_ptr<void>> owned;
};

namespace memra::family {

// A refusal with a status code, thrown inside a plugin and reported by guarded().
struct PluginError : std::runtime_error {
  PluginError(memra_status c, const std::string& message) : std::runtime_error(message), code(c) {}
  memra_status code;
};

inline memra_status report(memra_plugin_ctx* ctx, memra_status code, const std::string& message) {
  if (ctx && ctx->host && ctx->host->error_report) return ctx->host->error_report(ctx->host->ctx, code, message.c_str());
  return code;
}

// Every exported body runs inside this: no exception crosses the C boundary.
template <class F>
memra_status guarded(memra_plugin_ctx* ctx, F&& f) {
  const std::string who = ctx ? ctx->plugin_name + ": " : std::string();
  try {
    return f();
  } catch (const PluginError& e) {
    return report(ctx, e.code, who + e.what());
  } catch (const std::bad_alloc&) {
    return report(ctx, MEMRA_ERR_OUT_OF_MEMORY, who + "out of memory");
  } catch (const std::exception& e) {
    return report(ctx, MEMRA_ERR_INTERNAL, who + e.what());
  } catch (...) {
    return report(ctx, MEMRA_ERR_INTERNAL, who + "unknown exception");
  }
}

// The buffer protocol: copy with the NUL when it fits, always say the full size.
inline memra_status write_string(const std::string& s, char* buf, size_t buf_size, size_t* needed) {
  if (!needed) return MEMRA_ERR_INVALID_ARGUMENT;
  *needed = s.size() + 1;
  if (!buf || buf_size < s.size() + 1) return MEMRA_ERR_INVALID_ARGUMENT;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return MEMRA_OK;
}

// memra_plugin_init's common part: a fresh context holding the host table.
inline memra_status init_context(const memra_host_api* host, memra_plugin_api* out, const char* plugin_name,
                                 const memra_family_api* table) {
  if (!host || !out || !MEMRA_STRUCT_HAS(out, memra_plugin_api, shutdown)) return MEMRA_ERR_ABI_MISMATCH;
  auto* ctx = new (std::nothrow) memra_plugin_ctx();
  if (!ctx) return MEMRA_ERR_OUT_OF_MEMORY;
  ctx->host = host;
  ctx->plugin_name = plugin_name;
  out->kind = MEMRA_PLUGIN_KIND_FAMILY;
  out->ctx = ctx;
  out->family = table;
  out->shutdown = [](memra_plugin_ctx* c) { delete c; };
  return MEMRA_OK;
}

}  // namespace memra::family
