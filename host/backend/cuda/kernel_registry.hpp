// The kernel registry of a GPU backend: which kernel serves an op for a weight scheme,
// an activation format and a device architecture. Entries come from quant plugins
// (memra_quant_api.register_kernels, through the memra_kernel_registrar this builds; the
// backend has no kernels of its own for any scheme); lookup picks the highest score for
// the device among the entries that serve the weight's row length, ties going to the
// earlier registration. Plain C++, no driver calls, so the CPU test suite covers it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "memra/quant.h"

namespace memra::backend::cuda {

struct KernelKey {
  std::string op;          // "matmul"
  std::string scheme;      // lower case, as the plugin handles it ("example_i8")
  std::string activation;  // MEMRA_ACT_*: "f32", "bf16", "int8x32", "bf16s128" (memra/quant.h)
  std::string arch;        // "sm_90a", "sm_120a"
  bool operator==(const KernelKey&) const = default;
};

// Device kernels the backend launches itself (memra_matmul_kernels, SDK 2.10): a quant
// plugin's module and entry names, its weight rows' geometry and the forms of its GEMV
// and prompt GEMM. module: the backend's handle of the plugin's module (opaque here).
struct DeviceMatmul {
  const void* module = nullptr;
  int64_t block_elems = 1;
  int64_t block_bytes = 4;
  int64_t cols_multiple = 1;          // rows served: a multiple of this
  int form = MEMRA_GEMV_ROWS;          // MEMRA_GEMV_*
  bool by_alignment = false;          // _u8 / _u1 by row length (ROWS form, embedding)
  std::string gemv;                   // entry stem (ROWS, MMA16)
  int mma_warps = 16;
  int gemm = MEMRA_GEMM_NONE;          // MEMRA_GEMM_*
  struct Launch {
    std::string kernel;
    int rows_per_block = 1, blocks_per_sm = 0, threads = 128;
  };
  Launch launch[5];                   // INT8 form, per token tile 1, 2, <=4, <=8, more
  std::string gemm_dequant;
  int64_t gemm_unit = 32;
  bool pdl = false;                   // GEMV entries are PDL-aware
  std::string embedding;              // empty: no embedding gather
  // The tile of a launch over m tokens (INT8 form): 1, 2, <= 4, <= 8, more.
  static int tile(int64_t m) { return m <= 1 ? 0 : m <= 2 ? 1 : m <= 4 ? 2 : m <= 8 ? 3 : 4; }
};

// A plugin's matmul for one key (memra_kernel_desc).
struct PluginMatmul {
  memra_status (*matmul)(memra_plugin_ctx*, const memra_matmul_args*) = nullptr;
  memra_plugin_ctx* ctx = nullptr;
  void* kernel_data = nullptr;
};

struct KernelEntry {
  KernelKey key;
  int32_t score = 0;
  std::string provider;  // "built-in" or the plugin's name
  std::optional<DeviceMatmul> device;  // launched by the backend
  std::optional<PluginMatmul> plugin;  // the plugin's own matmul, launching through host services
  // Whether the entry serves a weight whose rows are `cols` long.
  bool serves(int64_t cols) const { return !device || (cols > 0 && cols % device->cols_multiple == 0); }
};

// The operations and activation formats an entry may name today. A plugin's own matmul
// takes f32 activations (memra_matmul_args.x); device kernels take any format.
bool known_kernel_op(const std::string& op);
bool known_activation(const std::string& activation);

class KernelRegistry {
 public:
  explicit KernelRegistry(std::string device_arch) : arch_(std::move(device_arch)) {}
  const std::string& device_arch() const { return arch_; }

  // Refuses (with the reason) an unknown op or activation, an empty scheme, a negative
  // score, or an arch other than the device's: an entry the device could never run.
  Status add(KernelEntry entry);
  // add()'s checks alone (the entry, scheme lower-cased, as add would keep it).
  Status check(KernelEntry& entry) const;
  // The highest-scoring entry for (op, scheme) on this device that serves rows of `cols`
  // (ties: the earlier registration); nullptr if none.
  const KernelEntry* find(const std::string& op, const std::string& scheme, int64_t cols) const;
  // The highest-scoring entry for (op, scheme, activation) on this device; nullptr if none.
  const KernelEntry* find(const std::string& op, const std::string& scheme, const std::string& activation) const;
  // Schemes with an entry for op on this device, sorted, for messages.
  std::vector<std::string> schemes(const std::string& op) const;
  size_t size() const { return entries_.size(); }

  // A memra_kernel_registrar whose add() registers a plugin's descriptors here under
  // `plugin_name`, with `ctx` as the plugin context its matmul is called with. The
  // registrar (and the device info it points at) must outlive register_kernels.
  struct PluginRegistrar {
    memra_kernel_registrar registrar{};
    KernelRegistry* registry = nullptr;
    std::string plugin_name;
    memra_plugin_ctx* plugin_ctx = nullptr;
    // The kernel services (plugins::KernelServices) the plugin loaded its modules through:
    // a device entry's module must come from them (this device). NULL: not checked.
    const void* services = nullptr;
    std::string last_error;  // why an add() was refused (the first refusal)
    std::vector<KernelEntry> staged;  // accepted, added by commit() once register_kernels succeeded
    // A registration with a refused descriptor adds nothing: the plugin's kernels are
    // all in or all out.
    Status commit();
  };
  void make_registrar(PluginRegistrar& out, const memra_device_info* device, std::string plugin_name,
                      memra_plugin_ctx* plugin_ctx, const void* services = nullptr);

 private:
  std::string arch_;
  std::vector<KernelEntry> entries_;
};

// The lower-case form of a scheme name (weights carry it as stored in the manifest).
std::string lower_scheme(const char* s);

}  // namespace memra::backend::cuda
