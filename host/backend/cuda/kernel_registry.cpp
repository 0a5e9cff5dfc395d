#include "host/backend/cuda/kernel_registry.hpp"

#include <algorithm>
#include <cctype>
#include <exception>

namespace memra::backend::cuda {

bool known_kernel_op(const std::string& op) { return op == "matmul"; }
bool known_activation(const std::string& activation) {
  return activation == "f32" || activation == "bf16" || activation == "int8x32";
}

std::string lower_scheme(const char* s) {
  std::string n(s ? s : "");
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n;
}

Status KernelRegistry::add(KernelEntry e) {
  MEMRA_TRY(check(e));
  entries_.push_back(std::move(e));
  return {};
}

Status KernelRegistry::check(KernelEntry& e) const {
  const std::string who = e.provider.empty() ? "a kernel" : e.provider + "'s kernel";
  if (!known_kernel_op(e.key.op)) return make_error(ErrorCode::invalid_argument, who + " names unknown op '" + e.key.op + "' (known: matmul)");
  if (!known_activation(e.key.activation))
    return make_error(ErrorCode::invalid_argument, who + " for " + e.key.scheme + " takes unknown activation format '" + e.key.activation +
                                                       "' (known: f32, bf16, int8x32)");
  if (e.plugin && e.key.activation != "f32")
    return make_error(ErrorCode::unsupported, who + " for " + e.key.scheme + " takes '" + e.key.activation +
                                                  "' activations; a plugin's matmul gets f32 activations (memra_matmul_args.x)");
  if (e.key.scheme.empty()) return make_error(ErrorCode::invalid_argument, who + " names no weight scheme");
  if (e.key.arch != arch_)
    return make_error(ErrorCode::unsupported, who + " for " + e.key.scheme + " is for arch '" + e.key.arch + "', which this device (" +
                                                  arch_ + ") cannot run");
  if (e.score < 0) return make_error(ErrorCode::invalid_argument, who + " for " + e.key.scheme + " has a negative score");
  if (e.builtin.has_value() == e.plugin.has_value())
    return make_error(ErrorCode::internal, who + " for " + e.key.scheme + " must be exactly one of built-in or plugin");
  if (e.plugin && !e.plugin->matmul) return make_error(ErrorCode::invalid_argument, who + " for " + e.key.scheme + " has no matmul function");
  e.key.scheme = lower_scheme(e.key.scheme.c_str());
  return {};
}

Status KernelRegistry::PluginRegistrar::commit() {
  for (KernelEntry& e : staged) MEMRA_TRY(registry->add(std::move(e)));
  staged.clear();
  return {};
}

const KernelEntry* KernelRegistry::find(const std::string& op, const std::string& scheme, const std::string& activation) const {
  const KernelEntry* best = nullptr;
  for (const KernelEntry& e : entries_)
    if (e.key.op == op && e.key.scheme == scheme && e.key.activation == activation && e.key.arch == arch_ &&
        (!best || e.score > best->score))
      best = &e;
  return best;
}

std::vector<std::string> KernelRegistry::schemes(const std::string& op) const {
  std::vector<std::string> out;
  for (const KernelEntry& e : entries_)
    if (e.key.op == op && std::find(out.begin(), out.end(), e.key.scheme) == out.end()) out.push_back(e.key.scheme);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

memra_status registrar_add(memra_kernel_registry* reg, const memra_kernel_desc* d) {
  auto* r = reinterpret_cast<KernelRegistry::PluginRegistrar*>(reg);
  if (!r) return MEMRA_ERR_INVALID_ARGUMENT;
  try {
    if (!MEMRA_STRUCT_HAS(d, memra_kernel_desc, kernel_data)) {
      r->last_error = "memra_kernel_desc struct_size is smaller than v2.1 (set MEMRA_KERNEL_DESC_STRUCT_SIZE)";
      return MEMRA_ERR_ABI_MISMATCH;
    }
    KernelEntry e;
    e.key = {d->op ? d->op : "", d->scheme ? d->scheme : "", d->activation ? d->activation : "", d->arch ? d->arch : ""};
    e.score = d->score;
    e.provider = "plugin '" + r->plugin_name + "'";
    e.plugin = PluginMatmul{d->matmul, r->plugin_ctx, d->kernel_data};
    Status s = r->registry->check(e);
    if (!s) {
      if (r->last_error.empty()) r->last_error = s.error().message;
      return s.error().code == ErrorCode::unsupported ? MEMRA_ERR_UNSUPPORTED : MEMRA_ERR_INVALID_ARGUMENT;
    }
    r->staged.push_back(std::move(e));
    return MEMRA_OK;
  } catch (const std::exception& ex) {
    r->last_error = ex.what();
    return MEMRA_ERR_INTERNAL;
  }
}

}  // namespace

void KernelRegistry::make_registrar(PluginRegistrar& out, const memra_device_info* device, std::string plugin_name,
                                    memra_plugin_ctx* plugin_ctx) {
  out.registry = this;
  out.plugin_name = std::move(plugin_name);
  out.plugin_ctx = plugin_ctx;
  out.last_error.clear();
  out.staged.clear();
  out.registrar.struct_size = MEMRA_KERNEL_REGISTRAR_STRUCT_SIZE;
  out.registrar.registry = reinterpret_cast<memra_kernel_registry*>(&out);
  out.registrar.device = device;
  out.registrar.add = registrar_add;
}

}  // namespace memra::backend::cuda
