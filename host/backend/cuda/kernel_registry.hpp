// The kernel registry of a GPU backend: which kernel serves an op for a weight scheme,
// an activation format and a device architecture. Entries come from the backend's
// built-in kernels (builtin_kernels.cpp) and from quant plugins (memra_quant_api.
// register_kernels, through the memra_kernel_registrar this builds); lookup picks the
// highest score for the device, ties going to the earlier registration. Plain C++, no
// driver calls, so the CPU test suite covers it.
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
  std::string scheme;      // lower case, "q4_k", "example_i8"
  std::string activation;  // "f32", "bf16", "int8x32" (kernels/matmul/gemv_int8_ref.hpp)
  std::string arch;        // "sm_90a", "sm_120a"
  bool operator==(const KernelKey&) const = default;
};

// A built-in matmul: the GEMV module and its kernels' geometry, and the prefill GEMM's
// way in (none; the weight streamed as a bf16 plane; a dequantization kernel into a
// bf16 plane, one pass; or into bf16 hi + lo planes, split: ref::bf16_prompt_matmul).
struct BuiltinMatmul {
  std::string module;                 // "matmul_q4_k"
  std::string gemv_suffix;            // memra_gemv_<suffix>[_u8|_u1]_t<N>
  bool suffix_by_alignment = false;   // float schemes: _u8 when a row is 8-element aligned, else _u1
  int64_t block_elems = 1;
  int64_t block_bytes = 4;
  // bf16 activations on the tensor cores: the GEMV memra_gemv_<suffix>_mma_n<NT> over
  // GemvMats (bf16 rows of 8-element multiples, kernels/matmul/gemv_mma_bf16.cuh; fp8,
  // gemv_mma_fp8.cuh) instead of memra_gemv_<suffix>[_u8]_t<N>.
  bool gemv_mma = false;
  int mma_warps = 16;                 // its warps per block (gemv_mma_layout.hpp kWarps, kFp8Warps)
  enum class Gemm { none, streams_bf16, dequantized_bf16, dequantized } gemm = Gemm::none;
  int64_t gemm_unit = 32;             // elements per thread of memra_gemm_dequant_<scheme>
  // int8x32 activations: the GEMV is memra_gemv8_<kernel>_r<R>_t<NT> of `module`
  // (kernels/matmul/matmul8_<scheme>.cu, launch table gemv_int8_launch.hpp), fed by
  // memra_quantize_act_q8_rows, for generated rows; prompt rows take the GEMM.
  bool int8_activations = false;
  // Prepared fp8-GEMV activations (kernels/matmul/fp8_act_ref.hpp): the tensor-core GEMV
  // memra_gemv_<suffix>_mma_n<NT> reads the bf16 plane and per-group back-scales that the
  // producer of x or memra_prepare_act_fp8_rows wrote, for generated rows.
  bool fp8_activations = false;
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
  std::optional<BuiltinMatmul> builtin;
  std::optional<PluginMatmul> plugin;
};

// The operations and activation formats an entry may name today. A plugin's kernel
// takes f32 activations (memra_matmul_args.x); the others are the built-in kernels'.
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
    std::string last_error;  // why an add() was refused (the first refusal)
    std::vector<KernelEntry> staged;  // accepted, added by commit() once register_kernels succeeded
    // A registration with a refused descriptor adds nothing: the plugin's kernels are
    // all in or all out.
    Status commit();
  };
  void make_registrar(PluginRegistrar& out, const memra_device_info* device, std::string plugin_name,
                      memra_plugin_ctx* plugin_ctx);

 private:
  std::string arch_;
  std::vector<KernelEntry> entries_;
};

// The lower-case form of a scheme name (weights carry it as stored in the manifest).
std::string lower_scheme(const char* s);

}  // namespace memra::backend::cuda
