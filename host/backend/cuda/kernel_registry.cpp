#include "host/backend/cuda/kernel_registry.hpp"

#include <algorithm>
#include <cctype>
#include <exception>

#include "core/plugin_host/kernel_services.hpp"

namespace memra::backend::cuda {

bool known_kernel_op(const std::string& op) { return op == "matmul"; }
bool known_activation(const std::string& activation) {
  return activation == MEMRA_ACT_F32 || activation == MEMRA_ACT_BF16 || activation == MEMRA_ACT_INT8X32 ||
         activation == MEMRA_ACT_BF16S128;
}

namespace {

// A device entry's own consistency: geometry, the GEMV form against its activation
// format, and the entry names each form and GEMM needs.
Status check_device(const std::string& who, const std::string& activation, DeviceMatmul& d) {
  auto bad = [&](const std::string& why) { return make_error(ErrorCode::invalid_argument, who + ": " + why); };
  if (!d.module) return bad("no kernel module (load it with host->kernel_module_load in register_kernels)");
  if (d.block_elems <= 0 || d.block_bytes <= 0) return bad("block_elems and block_bytes must be positive");
  if (d.cols_multiple == 0) d.cols_multiple = d.block_elems;
  if (d.cols_multiple < 0 || d.cols_multiple % d.block_elems != 0) return bad("cols_multiple must be a multiple of block_elems");
  switch (d.form) {
    case MEMRA_GEMV_ROWS:
      if (activation != MEMRA_ACT_F32 && activation != MEMRA_ACT_BF16) return bad("the ROWS GEMV form reads f32 rows (activation f32 or bf16)");
      if (d.gemv.empty()) return bad("no GEMV entry stem");
      break;
    case MEMRA_GEMV_MMA16:
      if (activation != MEMRA_ACT_BF16 && activation != MEMRA_ACT_BF16S128) return bad("the MMA16 GEMV form takes bf16 or bf16s128 activations");
      if (d.gemv.empty()) return bad("no GEMV entry stem");
      if (d.mma_warps <= 0 || d.mma_warps > 32) return bad("mma_warps must be 1..32");
      if (d.cols_multiple % 8 != 0) return bad("the MMA16 form needs rows of a multiple of 8 (cols_multiple)");
      break;
    case MEMRA_GEMV_INT8:
      if (activation != MEMRA_ACT_INT8X32) return bad("the INT8 GEMV form takes int8x32 activations");
      if (d.cols_multiple % 32 != 0) return bad("int8x32 activations need rows of a multiple of 32 (cols_multiple)");
      for (const DeviceMatmul::Launch& l : d.launch)
        if (l.kernel.empty() || l.rows_per_block <= 0 || l.blocks_per_sm < 0 || l.threads <= 0 || l.threads > 1024)
          return bad("every token tile needs a launch (kernel stem, rows_per_block > 0, blocks_per_sm >= 0, threads 1..1024)");
      break;
    default:
      return bad("unknown GEMV form " + std::to_string(d.form));
  }
  if (d.gemm < MEMRA_GEMM_NONE || d.gemm > MEMRA_GEMM_SPLIT) return bad("unknown GEMM form " + std::to_string(d.gemm));
  if ((d.gemm == MEMRA_GEMM_BF16 || d.gemm == MEMRA_GEMM_SPLIT) && (d.gemm_dequant.empty() || d.gemm_unit <= 0))
    return bad("the prompt GEMM needs a dequantiser entry and its elements per thread (gemm_unit)");
  if (d.gemm == MEMRA_GEMM_STREAMS_BF16 && d.block_bytes != 2 * d.block_elems) return bad("STREAMS_BF16 needs bf16 rows (2 bytes per element)");
  return {};
}

}  // namespace

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
                                                       "' (known: f32, bf16, int8x32, bf16s128)");
  if (e.plugin && e.key.activation != MEMRA_ACT_F32)
    return make_error(ErrorCode::unsupported, who + " for " + e.key.scheme + " takes '" + e.key.activation +
                                                  "' activations; a plugin's own matmul gets f32 activations (memra_matmul_args.x): "
                                                  "register device kernels (memra_kernel_desc.kernels) for other formats");
  if (e.key.scheme.empty()) return make_error(ErrorCode::invalid_argument, who + " names no weight scheme");
  if (e.key.arch != arch_)
    return make_error(ErrorCode::unsupported, who + " for " + e.key.scheme + " is for arch '" + e.key.arch + "', which this device (" +
                                                  arch_ + ") cannot run");
  if (e.score < 0) return make_error(ErrorCode::invalid_argument, who + " for " + e.key.scheme + " has a negative score");
  if (e.device.has_value() == e.plugin.has_value())
    return make_error(ErrorCode::invalid_argument, who + " for " + e.key.scheme + " must give exactly one of a matmul function or device kernels");
  if (e.plugin && !e.plugin->matmul) return make_error(ErrorCode::invalid_argument, who + " for " + e.key.scheme + " has no matmul function");
  if (e.device) MEMRA_TRY(check_device(who + " for " + e.key.scheme, e.key.activation, *e.device));
  e.key.scheme = lower_scheme(e.key.scheme.c_str());
  return {};
}

Status KernelRegistry::PluginRegistrar::commit() {
  for (KernelEntry& e : staged) MEMRA_TRY(registry->add(std::move(e)));
  staged.clear();
  return {};
}

const KernelEntry* KernelRegistry::find(const std::string& op, const std::string& scheme, int64_t cols) const {
  const KernelEntry* best = nullptr;
  for (const KernelEntry& e : entries_)
    if (e.key.op == op && e.key.scheme == scheme && e.key.arch == arch_ && e.serves(cols) && (!best || e.score > best->score))
      best = &e;
  return best;
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
    const memra_matmul_kernels* k = MEMRA_STRUCT_HAS(d, memra_kernel_desc, kernels) ? d->kernels : nullptr;
    if (k && d->matmul) {
      r->last_error = e.provider + "'s kernel for " + e.key.scheme + " gives both a matmul function and device kernels";
      return MEMRA_ERR_INVALID_ARGUMENT;
    }
    if (k) {
      if (!MEMRA_STRUCT_HAS(k, memra_matmul_kernels, embedding)) {
        r->last_error = "memra_matmul_kernels struct_size is smaller than v2.10 (set MEMRA_MATMUL_KERNELS_STRUCT_SIZE)";
        return MEMRA_ERR_ABI_MISMATCH;
      }
      DeviceMatmul m;
      // The host's handle of a module this backend loaded (host_services.cpp): the backend's own module.
      if (k->module) {
        const auto* h = reinterpret_cast<const plugins::KernelModuleHandle*>(k->module);
        if (r->services && h->owner != r->services) {
          r->last_error = e.provider + "'s kernel for " + e.key.scheme + " names a module not loaded on this device";
          return MEMRA_ERR_INVALID_ARGUMENT;
        }
        m.module = h->module;
      }
      m.block_elems = k->block_elems, m.block_bytes = k->block_bytes, m.cols_multiple = k->cols_multiple;
      m.form = k->gemv_form, m.by_alignment = k->by_alignment != 0, m.gemv = k->gemv ? k->gemv : "";
      m.mma_warps = k->mma_warps, m.gemm = k->gemm;
      for (int i = 0; i < 5; ++i)
        m.launch[i] = {k->launch[i].kernel ? k->launch[i].kernel : "", k->launch[i].rows_per_block, k->launch[i].blocks_per_sm,
                       k->launch[i].threads};
      m.gemm_dequant = k->gemm_dequant ? k->gemm_dequant : "";
      m.gemm_unit = k->gemm_unit;
      m.pdl = k->pdl != 0;
      m.embedding = k->embedding ? k->embedding : "";
      e.device = std::move(m);
    } else {
      e.plugin = PluginMatmul{d->matmul, r->plugin_ctx, d->kernel_data};
    }
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
                                    memra_plugin_ctx* plugin_ctx, const void* services) {
  out.registry = this;
  out.services = services;
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
