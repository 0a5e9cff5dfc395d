// Shared implementation of memra's built-in quant plugins. Each built-in plugin
// (.so) is a thin file naming its schemes; weight layouts are the GGUF block
// layouts carried bit-exactly (f32/f16/bf16 and the ggml block types), plus
// memra's "fp8" layout. The CPU matmul is the scheme's reference arithmetic
// (docs/ARCHITECTURE.md, "Per-scheme numerics"): integer schemes on int8 activations
// (plugins/quant-common/gemv_int8_ref: each row quantised, integer dots, the CUDA kernels'
// f32 order, so CPU and GPU rows are bitwise equal); the others dequantize one weight
// row exactly (memra_quant_ref, the oracle) and accumulate in float32 in a fixed
// order. Either way a row's result never depends on how many tokens share the call.
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include "memra/memra.h"

namespace memra::quant_plugin {

// What a built-in plugin states about each scheme it handles: its layout, its prompt
// rows' numerics (memra_scheme_info) and the CUDA kernels it ships beside its .so, which
// register_kernels registers for the backend to launch (memra_matmul_kernels, SDK 2.10).
enum class Kernels {
  none,        // CPU only
  float_rows,  // module matmul_float: memra_gemv_<s>_u8/_u1_t<N>, the split prompt GEMM
  bf16,        // module matmul_float: the tensor-core GEMV (rows of 8-multiples), else _u1 rows
  fp8,         // module matmul_fp8: the tensor-core GEMV over bf16s128 rows
  block,       // module matmul_<s>: f32-row GEMV; with int8, module matmul8_<s>: int8x32 GEMVs
};
struct SchemeDef {
  const char* name;
  int64_t block_elems;
  int64_t block_bytes;
  int32_t prompt;     // MEMRA_PROMPT_*
  Kernels kernels;
  bool int8 = false;  // block: int8x32 GEMVs for rows of whole 256-element runs
  bool rows_pdl = true;  // block: the f32-row GEMV entries are PDL-aware
  // memra-repack (memra_scheme_info): what it may write, and the mix of a --quant target.
  int32_t repack = MEMRA_REPACK_NONE;
  const char* sensitive = nullptr;  // the head's and attn_v's scheme
  const char* fallback = nullptr;   // for rows that break the block
  int32_t keep_as_stored = 0;       // MEMRA_KEEP_* bits
};

}  // namespace memra::quant_plugin

// One per memra_plugin_init: the host table and which schemes this .so serves.
struct memra_plugin_ctx {
  const memra_host_api* host;
  const char* const* handled;
  const char* name;
  const memra::quant_plugin::SchemeDef* schemes;  // one per handled name
  size_t scheme_count;
};

namespace memra::quant_plugin {

// Scheme names this build knows: lower-case ggml names ("q4_k") and "fp8".
// Returns false when `scheme` is not in `handled`.
bool handles(const char* const* handled, const char* scheme);

memra_status weight_bytes(memra_plugin_ctx* ctx, const char* scheme, int64_t rows, int64_t cols, uint64_t* out);
memra_status quantize(memra_plugin_ctx* ctx, const char* scheme, const float* src, int64_t rows, int64_t cols,
                      void* dst, uint64_t dst_bytes);
memra_status dequantize(memra_plugin_ctx* ctx, const char* scheme, const void* src, uint64_t src_bytes, int64_t rows,
                        int64_t cols, float* dst);
memra_status matmul(memra_plugin_ctx* ctx, const memra_matmul_args* args);
memra_status register_kernels(memra_plugin_ctx* ctx, const memra_kernel_registrar* registrar);
memra_status scheme_info(memra_plugin_ctx* ctx, const char* scheme, memra_scheme_info* out);

// memra_plugin_init: a context for this host, the quant table and its shutdown.
// api: the plugin's quant table (kQuantApi, or one that replaces some of its functions:
// a scheme of the plugin's own layout, a checkpoint importer).
memra_status init(const memra_host_api* host, memra_plugin_api* out, const char* const* handled, const char* plugin_name,
                  const SchemeDef* schemes, size_t scheme_count, const memra_quant_api* api);

int32_t score_cpu_and_cuda(const memra_device_info* device, const char* handled_name);

// Reports an error through the host (error_report) and returns code.
memra_status report(memra_plugin_ctx* ctx, memra_status code, const std::string& message);

// Exceptions become MEMRA_ERR_INTERNAL with the plugin's name (nothing crosses the ABI).
template <class F>
memra_status guarded(memra_plugin_ctx* ctx, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return report(ctx, MEMRA_ERR_INTERNAL, std::string(ctx ? ctx->name : "quant") + ": " + e.what());
  } catch (...) {
    return report(ctx, MEMRA_ERR_INTERNAL, std::string(ctx ? ctx->name : "quant") + ": unknown exception");
  }
}

extern const memra_quant_api kQuantApi;

}  // namespace memra::quant_plugin

// Defines the two exported entry points of a built-in quant plugin; SCHEMES: an array of
// SchemeDef, one per handled name; API: its quant table (kQuantApi, or one replacing some of
// its functions: a layout of the plugin's own, a checkpoint importer).
#define MEMRA_DEFINE_QUANT_PLUGIN_API(NAME, DESCRIPTION, SCHEMES, API, ...)                           \
  namespace {                                                                                         \
  const char* const kHandles[] = {__VA_ARGS__, nullptr};                                              \
  const memra_plugin_descriptor kDescriptor = {                                                       \
      MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE, MEMRA_ABI_MAJOR, MEMRA_ABI_MINOR, MEMRA_PLUGIN_KIND_QUANT,  \
      NAME, "0.1.0", DESCRIPTION, kHandles, memra::quant_plugin::score_cpu_and_cuda};                  \
  }                                                                                                   \
  MEMRA_EXPORT const memra_plugin_descriptor* memra_plugin_query(void) { return &kDescriptor; }       \
  MEMRA_EXPORT memra_status memra_plugin_init(const memra_host_api* host, memra_plugin_api* out) {    \
    return memra::quant_plugin::init(host, out, kHandles, NAME, SCHEMES, sizeof(SCHEMES) / sizeof(SCHEMES[0]), &(API)); \
  }

// The built-in quant table (kQuantApi).
#define MEMRA_DEFINE_QUANT_PLUGIN(NAME, DESCRIPTION, SCHEMES, ...) \
  MEMRA_DEFINE_QUANT_PLUGIN_API(NAME, DESCRIPTION, SCHEMES, memra::quant_plugin::kQuantApi, __VA_ARGS__)
