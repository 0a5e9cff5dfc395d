// The checks memra-kernel-check runs (also run by tests/cuda). Each adds one line
// per check to the report. Per-op bounds (normalised MSE against the CPU
// reference, which accumulates in double for matmul):
//   matmul 1e-9, rms_norm / add_rms_norm 1e-10, gated activations 1e-10,
//   RoPE 1e-10, attention 1e-9; embedding, gather, add and NVRTC outputs bitwise.
// Bit-identity (batch invariance): matmul and norm rows for M = 1..16 and in a
// second tile (M = 40) with the other rows' contents redrawn; attention rows alone
// vs beside three other sequences and in a prefill vs a decode step; attention and
// prefill attention over f32 and bf16 KV caches. The int8-activation GEMVs and their
// quantiser (check_int8_gemv.cpp) are bitwise against their references for every M,
// plus an accuracy bound (5e-4) against the exact product.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/tools/memra-kernel-check/harness.hpp"
#include "repack/quant/ggml_type.hpp"

namespace memra::kcheck {

constexpr double kMatmulBound = 1e-9;
constexpr double kNormBound = 1e-10;
constexpr double kActivationBound = 1e-10;
constexpr double kRopeBound = 1e-10;
constexpr double kAttentionBound = 1e-9;

struct CheckOptions {
  uint64_t seed = 1234;
  bool quick = false;      // smaller shapes (tests)
  std::string temp_dir;    // for the NVRTC cache and PTX-only fatbin checks
  std::string kernel_dir;  // the fatbins the backend under test loads
};

void check_matmul(Device& d, Report& r, const CheckOptions& o);
// The prefill GEMM on prompt rows (check_gemm.cpp: bounds, row invariance, mixed steps).
void check_gemm(Device& d, Report& r, const CheckOptions& o);
void check_embedding_gather(Device& d, Report& r, const CheckOptions& o);
void check_elementwise(Device& d, Report& r, const CheckOptions& o);
void check_attention(Device& d, Report& r, const CheckOptions& o);
// Prefill attention on prompt rows (check_prefill_attention.cpp): bounds, chunking
// invariance bit checks, mixed steps.
void check_prefill_attention(Device& d, Report& r, const CheckOptions& o);
// CUDA step graphs (MEMRA_CUDA_GRAPH): captured and replayed steps bitwise == eager.
void check_step_graph(Device& d, Report& r, const CheckOptions& o);
// Integer-activation decode GEMVs and their activation quantiser (check_int8_gemv.cpp):
// bitwise against gemv_int8_ref for M = 1..16 and 40, every rows-per-block variant, and
// their int8-activation error against the exact f32 product.
void check_int8_gemv(Device& d, Report& r, const CheckOptions& o);
// The fp8 decode GEMV's prepared activations and the GEMV over them (check_fp8_gemv.cpp):
// the preparation bitwise against ref::prepare_act_fp8, the GEMV bitwise against the
// path that scaled x per block, for M = 1..16 and 40.
void check_fp8_gemv(Device& d, Report& r, const CheckOptions& o);
// The fused decode path (check_decode_fusion.cpp): int8x32 or fp8-GEMV rows written by
// add_rms_norm and the gated activations, q/k/v and gate/up GEMVs merged into one
// launch; bitwise.
void check_decode_fusion(Device& d, Report& r, const CheckOptions& o);

struct BenchOptions {
  uint64_t seed = 1234;
  int device = 0;  // the backend's CUDA device index
  bool bf16 = false;  // --bench-bf16: the bf16 GEMVs instead of the int8 ones
  bool fp8 = false;   // --bench-fp8: the fp8 GEMV's shapes instead
  std::string filter;  // --filter: only the int8 schemes whose name contains it
};
// memra-kernel-check --bench (bench_int8_gemv.cpp): int8-activation vs today's GEMVs on
// the Qwen3-8B decode shapes, GB/s and % of the measured copy bandwidth.
void bench_int8_gemv(Device& d, const BenchOptions& o);

// Quant plugins' own kernels (check_plugin_kernels.cpp, --plugin-dir): through the
// backend's matmul op against the plugin's CPU matmul, and row invariance.
void check_plugin_kernels(Device& d, Report& r, const CheckOptions& o, const std::vector<std::string>& plugin_dirs);

// Ops family plugins bring (check_plugin_ops.cpp, the family plugins in plugin_dirs): each
// op's CUDA form against its CPU reference on the plugin's cases, over carried, forked
// and zeroed recurrent-state slots.
void check_plugin_ops(Device& d, Report& r, const CheckOptions& o, const std::vector<std::string>& plugin_dirs);

// moe_ffn v2 (check_moe.cpp): routed experts over stacked tensors of every scheme with a row
// gather, up to 512 experts and top-8, with and without a shared expert, against the exact
// dequantised MoE (nmse <= 1e-9); rows alone and in 5 bitwise the 40-row step.
void check_moe(Device& d, Report& r, const CheckOptions& o);

// Kernel services and NVRTC; may create extra backends.
void check_services(Device& d, Report& r, const CheckOptions& o);

// Device sampling (check_sampling.cpp): device token == CPU reference token, bitwise
// memra_exp and Philox, a row's token alone == among 16 rows.
void check_sampling(Device& d, Report& r, const CheckOptions& o);

inline void run_all_checks(Device& d, Report& r, const CheckOptions& o) {
  check_embedding_gather(d, r, o);
  check_elementwise(d, r, o);
  check_matmul(d, r, o);
  check_int8_gemv(d, r, o);
  check_fp8_gemv(d, r, o);
  check_decode_fusion(d, r, o);
  check_gemm(d, r, o);
  check_attention(d, r, o);
  check_prefill_attention(d, r, o);
  check_step_graph(d, r, o);
  check_moe(d, r, o);
  check_services(d, r, o);
  check_sampling(d, r, o);
}

// The weight dtype a scheme is uploaded with (f32/f16/bf16, else ggml blocks), and its
// ggml type for the CPU references.
memra_dtype dtype_of(const std::string& scheme);
quant::GgmlType type_of(const std::string& scheme);

// Random weight bytes in a scheme's layout with sane scale fields; flavour
// "random" | "large" (big scales) | "zeros" (zero scales) | "denormal" (subnormal f16 scales).
std::vector<uint8_t> random_weight(Rng& rng, const std::string& scheme, int64_t rows, int64_t cols,
                                   const std::string& flavour);

// The CPU references' view of a weight: its ggml type and bytes. memra fp8 has no
// ggml type: it is handed over as its exact f32 values (e4m3(q) * scale).
struct RefWeight {
  quant::GgmlType type;
  std::vector<uint8_t> bytes;
};
RefWeight ref_weight(const std::string& scheme, const std::vector<uint8_t>& w, int64_t rows, int64_t cols);

// The backend matmul's reference for a scheme on int8 activations: each row of x
// quantised (ref::quantize_act_q8), then ref::gemv_int8. False for other schemes.
bool int8_matmul_ref(const std::string& scheme, const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                     const std::vector<float>& x, int64_t m, const float* bias, float* y);

}  // namespace memra::kcheck
