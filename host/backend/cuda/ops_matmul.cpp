// Matmul of the CUDA backend, over the kernels quant plugins register (kernel_registry.hpp;
// memra_matmul_kernels, SDK 2.10): the backend knows no scheme, only the forms below.
//
// Prompt rows and generated rows (memra_forward_batch.prompt_tokens) take two paths,
// chosen per row by its flag, never by the batch size:
//  - generated rows (decode, speculative verify; every row when the flags are absent)
//    run the scheme's GEMV (ROWS, MMA16 or INT8 form), bitwise the same for any M;
//  - prompt rows run the tensor-core GEMM of kernels/matmul/gemm_mma.cu over weight
//    rows the scheme's dequantiser writes as bf16 planes, also bitwise the same for any
//    M, any chunking and any position in the batch (fixed tiles and k order), so a
//    prompt's KV does not depend on how it was batched or chunked.
// In a mixed step the prompt rows are gathered into the GEMM's operand planes and
// its results scattered back by index; the generated rows are gathered, run through
// the GEMV on their own and scattered back (bitwise copies). The GEMM's operands follow
// the registration's GEMM form: MEMRA_GEMM_STREAMS_BF16 and MEMRA_GEMM_BF16 take bf16
// activations, one pass (cuBLASLt where it is installed and row invariant, else the own
// GEMM); MEMRA_GEMM_SPLIT takes f32 activations, both operands split into bf16 hi + lo,
// f32-faithful.
//
// Prepared activation formats (int8x32, bf16s128; memra/quant.h) are made once per row
// set: memra_quantize_act_q8_rows / memra_prepare_act_fp8_rows (matmul8_act), shared by
// the next matmuls over the same rows, or written by the producing norm / activation with
// BackendOptions::fuse_decode (ops_basic.cpp); then the GEMV over them.
//
// A plugin's own matmul (memra_kernel_desc.matmul) serves every row of the matmul and
// launches through the host's kernel services.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/common/tensor_shape.hpp"
#include "host/backend/cuda/cu_error.hpp"

#include "host/backend/cuda/cuda_backend.hpp"
#include "kernels/matmul/gemv_mats.hpp"
#include "kernels/matmul/gemv_mma_layout.hpp"

namespace memra::backend::cuda {
namespace {

// A GEMM path exists for schemes whose registered kernel says so; the operand loads
// are 16 bytes, so rows of a multiple of 8.
bool gemm_shape(int64_t cols) { return cols % 8 == 0 && cols <= (int64_t{1} << 30); }

constexpr int64_t kGemmTile = 128;                  // gemm_mma.cuh kBM = kBN
constexpr uint64_t kPlaneBudget = 256ull << 20;     // dequantized weight planes per chunk of rows
constexpr unsigned kGemmThreads = 256;
constexpr unsigned kSmemWsplit = 4 * 8192 * 3, kSmemFast = 2 * 8192 * 4;

}  // namespace

CudaBackend::GemmBuffer::~GemmBuffer() {
  if (ptr) cuMemFree(ptr);
}

Result<SchemeInfo> CudaBackend::scheme(const memra_weight* w) const {
  if (!w->quant) return make_error(ErrorCode::invalid_argument, "weight has no quant scheme");
  const std::string name = lower_scheme(w->quant);
  if (w->ndim != 2) return make_error(ErrorCode::invalid_argument, std::string("weight ") + (w->name ? w->name : "?") + " is not a matrix");
  const int64_t cols = w->shape[1];
  const KernelEntry* e = registry_->find("matmul", name, cols);
  if (!e) return no_kernel(name, cols);
  SchemeInfo info;
  info.scheme = name;
  info.entry = e;
  if (!e->device) return info;  // a plugin's own matmul: the plugin checks its own layout
  const DeviceMatmul& d = *e->device;
  info.dev = &d;
  info.module = static_cast<Module*>(const_cast<void*>(d.module));
  if (cols <= 0 || cols % d.block_elems != 0)
    return make_error(ErrorCode::invalid_argument, "weight row length breaks the " + name + " block size");
  info.row_bytes = static_cast<uint64_t>(cols / d.block_elems) * static_cast<uint64_t>(d.block_bytes);
  const std::string align = d.by_alignment ? (cols % 8 == 0 ? "_u8" : "_u1") : "";
  info.gemv = d.gemv + align;
  if (!d.embedding.empty()) info.embedding = d.embedding + align;
  info.int8 = e->key.activation == MEMRA_ACT_INT8X32;
  info.bf16s128 = e->key.activation == MEMRA_ACT_BF16S128;
  info.mma = d.form == MEMRA_GEMV_MMA16;
  info.mma_kernel = d.gemv + "_mma_n";
  info.mma_warps = d.mma_warps;
  if (info.row_bytes * static_cast<uint64_t>(w->shape[0]) > w->bytes)
    return make_error(ErrorCode::invalid_argument, std::string("weight ") + (w->name ? w->name : "?") + " holds fewer bytes than its shape needs");
  return info;
}

Result<Kernel*> CudaBackend::scheme_kernel(const SchemeInfo& s, const std::string& name, bool gemv) {
  auto k = modules_->get(s.module, name);
  if (!k) return make_error(k.error().code, s.entry->provider + ": " + k.error().message);
  if (gemv && s.dev->pdl) (*k)->pdl = true;
  return *k;
}

Error CudaBackend::no_kernel(const std::string& scheme, int64_t cols) const {
  std::string known;
  for (const std::string& s : registry_->schemes("matmul")) known += (known.empty() ? "" : ", ") + s;
  return make_error(ErrorCode::unsupported, "no matmul kernel is registered for weight scheme '" + scheme + "' with rows of " + std::to_string(cols) +
                                                " on " + registry_->device_arch() + " (registered: " + (known.empty() ? "none" : known) +
                                                "); install a quant plugin with CUDA kernels for it, use the CPU backend or requantize");
}

// A plugin's kernel: the plugin launches it through host->kernel_launch, which lands in
// kernel_launch below and is recorded into the step like the backend's own launches.
memra_status CudaBackend::matmul_plugin(const SchemeInfo& s, CUdeviceptr wd, int64_t rows, int64_t cols, CUdeviceptr xd,
                                        int64_t m, CUdeviceptr od) {
  const PluginMatmul& p = *s.entry->plugin;
  memra_matmul_args a{};
  a.struct_size = MEMRA_MATMUL_ARGS_STRUCT_SIZE;
  a.scheme = s.scheme.c_str();
  a.backend = MEMRA_BACKEND_CUDA;
  a.weight = reinterpret_cast<const void*>(wd);
  a.rows = rows;
  a.cols = cols;
  a.m = m;
  a.x = reinterpret_cast<const float*>(xd);
  a.y = reinterpret_cast<float*>(od);
  a.stream = nullptr;  // the backend's stream (kernel_launch with stream NULL)
  a.kernel_data = p.kernel_data;
  last_error_.clear();
  ++plugin_matmuls_;
  const memra_status st = p.matmul(p.ctx, &a);
  if (st != MEMRA_OK)
    return fail(st, s.entry->provider + ": matmul of " + s.scheme + " failed (" + memra_status_name(st) + ")" +
                        (last_error_.empty() ? "" : ": " + last_error_));
  return MEMRA_OK;
}

memra_status CudaBackend::matmul(const memra_tensor* x, const memra_weight* w, const memra_weight* bias, memra_tensor* out) {
  memra_status st = MEMRA_OK;
  const CUdeviceptr wd = resolve(w, &st);
  if (st != MEMRA_OK) return st;
  CUdeviceptr bd = 0;
  if (bias) {
    if (bias->dtype != MEMRA_DTYPE_F32) return fail(MEMRA_ERR_INVALID_ARGUMENT, "matmul: bias must be F32");
    bd = resolve(bias, &st);
    if (st != MEMRA_OK) return st;
  }
  auto s = scheme(w);
  if (!s) return fail(s.error());
  const int64_t rows = w->shape[0], cols = w->shape[1];
  const int64_t xdim = x->ndim > 0 ? x->shape[x->ndim - 1] : 1;
  if (xdim != cols) return fail(MEMRA_ERR_INVALID_ARGUMENT, std::string("matmul: x width does not match ") + (w->name ? w->name : "?"));
  const int64_t m = tensor_numel(x) / cols;
  const CUdeviceptr xd = reinterpret_cast<CUdeviceptr>(x->data), od = reinterpret_cast<CUdeviceptr>(out->data);
  const uint64_t entry_epoch = write_epoch_;
  if (s->entry->plugin) {
    // The plugin's kernel serves every row (its own reduction order, batch invariant).
    if (bd) return fail(MEMRA_ERR_UNSUPPORTED, "matmul: " + s->entry->provider + "'s kernel for " + s->scheme + " takes no bias (weight " +
                                                   (bias->name ? bias->name : "?") + ")");
    return matmul_plugin(*s, wd, rows, cols, xd, m, od);
  }

  if (s->int8 || s->bf16s128) {
    // Generated rows on the GEMV over prepared activations (int8: bitwise the CPU
    // reference), prompt rows on the GEMM.
    auto r = matmul_split(m);
    if (!r) return fail(r.error());
    const DeviceBatch::RowSplit* split = *r;
    memra_status st = MEMRA_OK;
    if (!split || split->prompt == 0) {
      st = matmul_prepared(*s, wd, rows, cols, xd, 0, m, od, bd, entry_epoch);
    } else {
      const bool all_prompt = split->generated == 0;
      st = matmul_gemm(*s, wd, rows, cols, xd, all_prompt ? m : split->prompt, all_prompt ? 0 : split->prompt_rows, od, bd);
      if (st == MEMRA_OK && !all_prompt) {
        // The generated rows are quantised by index (no gather), their results scattered back.
        const int64_t gen = split->generated;
        st = gemm_buffer(gemm_rows_, static_cast<uint64_t>(gen * rows) * 4u);
        if (st == MEMRA_OK) st = matmul_prepared(*s, wd, rows, cols, xd, split->generated_rows, gen, gemm_rows_.ptr, bd, entry_epoch);
        if (st == MEMRA_OK)
          st = launch("matmul_gemm", "memra_gemm_scatter_rows", static_cast<unsigned>(gen), 1, 256, 0, gemm_rows_.ptr, rows,
                      split->generated_rows, od);
      }
    }
    if (st != MEMRA_OK) return st;
    // The quantised rows stay valid for the next matmul unless this one wrote over x.
    const uint64_t x_end = xd + static_cast<uint64_t>(m * cols) * 4u, o_end = od + static_cast<uint64_t>(m * rows) * 4u;
    if (act_rows_.valid) {
      if (od < x_end && xd < o_end) act_rows_.valid = false;
      else act_rows_.epoch = write_epoch_;
    }
    return MEMRA_OK;
  }

  // The path of each row follows its prompt flag; no flags, no prompt rows, or a
  // scheme without a GEMM: every row on the GEMV, exactly as before.
  const DeviceBatch::RowSplit* split = nullptr;
  if (s->dev->gemm != MEMRA_GEMM_NONE && gemm_shape(cols)) {
    auto r = matmul_split(m);
    if (!r) return fail(r.error());
    split = *r;
  }
  if (!split || split->prompt == 0) return matmul_gemv(*s, wd, rows, cols, xd, m, od, bd);
  if (split->generated == 0) return matmul_gemm(*s, wd, rows, cols, xd, m, 0, od, bd);

  // Mixed step: the prompt rows through the GEMM (gathered and scattered by index),
  // the generated rows gathered, through the GEMV on their own, scattered back.
  if (const memra_status g = matmul_gemm(*s, wd, rows, cols, xd, split->prompt, split->prompt_rows, od, bd); g != MEMRA_OK)
    return g;
  return matmul_rows_gemv(*s, wd, rows, cols, xd, split->generated, split->generated_rows, od, bd);
}

// out[row_index[i]] = the f32-activation GEMV of x[row_index[i]], i < n: the rows
// gathered, run on their own (bitwise what they compute in any other batch), scattered back.
memra_status CudaBackend::matmul_rows_gemv(const SchemeInfo& s, CUdeviceptr wd, int64_t rows, int64_t cols, CUdeviceptr xd,
                                           int64_t n, CUdeviceptr row_index, CUdeviceptr od, CUdeviceptr bd) {
  const uint64_t x_bytes = align_up(static_cast<uint64_t>(n * cols) * 4u, 256);
  if (const memra_status b = gemm_buffer(gemm_rows_, x_bytes + static_cast<uint64_t>(n * rows) * 4u); b != MEMRA_OK) return b;
  const CUdeviceptr xs = gemm_rows_.ptr, ys = gemm_rows_.ptr + x_bytes;
  if (const memra_status g = launch("matmul_gemm", "memra_gemm_gather_rows", static_cast<unsigned>(n), 1, 256, 0, xd, cols,
                                    row_index, xs);
      g != MEMRA_OK)
    return g;
  if (const memra_status g = matmul_gemv(s, wd, rows, cols, xs, n, ys, bd); g != MEMRA_OK) return g;
  return launch("matmul_gemm", "memra_gemm_scatter_rows", static_cast<unsigned>(n), 1, 256, 0, ys, rows, row_index, od);
}

memra_status CudaBackend::matmul_gemv(const SchemeInfo& s, CUdeviceptr wd, int64_t rows, int64_t cols, CUdeviceptr xd,
                                      int64_t m, CUdeviceptr od, CUdeviceptr bd) {
  if (s.mma) {  // gemv_mma_bf16.cuh
    const uint64_t in_lo[2] = {xd, 0}, in_hi[2] = {xd + static_cast<uint64_t>(m * cols) * 4u, 0};
    const CUdeviceptr x[1] = {xd};
    return matmul_mma(s, wd, rows, cols, m, x, in_lo, in_hi, od, bd, write_epoch_);
  }
  constexpr int64_t kTile = 16, kWarps = 4;  // kernels/matmul/gemv.cuh
  // Accumulators per lane: the smallest of 1, 2, 4, 8, 16 that holds min(m, 16)
  // tokens. Every variant computes a token identically (gemv.cuh), so the choice,
  // which depends on the batch, cannot change any token's bits.
  int64_t nt = 1;
  while (nt < std::min<int64_t>(m, kTile)) nt *= 2;
  const auto gx = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  const auto gy = static_cast<unsigned>((m + nt - 1) / nt);
  const std::string kernel = s.gemv + "_t" + std::to_string(nt);
  const int64_t row_bytes = static_cast<int64_t>(s.row_bytes);
  auto k = scheme_kernel(s, kernel, true);
  if (!k) return fail(k.error());
  int64_t rb = row_bytes, r = rows, c = cols, mm = m;
  CUdeviceptr w = wd, x = xd, o = od, b = bd;
  void* argv[] = {&w, &rb, &r, &c, &x, &mm, &o, &b};
  const memra_status st = launch_raw(*k, gx, gy, 32 * kWarps, 0, argv);
  return st != MEMRA_OK ? st : after_op(kernel.c_str());
}

Result<CudaBackend::QuantizedRows> CudaBackend::alloc_act_rows(ActFormat f, CUdeviceptr x, CUdeviceptr row_index, int64_t m,
                                                               int64_t cols) {
  // int8x32: codes [m][cols] and {d, s} [m][cols/32]; fp8: the bf16 plane [m][cols] and
  // one f32 back-scale per 128-group.
  const bool fp8 = f == ActFormat::bf16s128;
  const uint64_t q_bytes = align_up(static_cast<uint64_t>(m * cols) * (fp8 ? 2u : 1u), 256);
  const uint64_t meta_bytes = fp8 ? static_cast<uint64_t>(m * (cols / 128)) * 4u : static_cast<uint64_t>(m * (cols / 32)) * 8u;
  auto buf = arena_->alloc(q_bytes + meta_bytes);
  if (!buf) return buf.error();
  return QuantizedRows{true, f, x, row_index, *buf, *buf + q_bytes, m, cols, 0};
}

// Rows of x (row_index[i], or i when 0) prepared in format f (int8x32 blocks,
// memra/quant.h: int8x32 or bf16s128), in step scratch. The
// previous matmul's rows are reused when they are of the same format and covered the
// same rows of the same x, and nothing was written to the device since that matmul
// (entry_epoch: write_epoch_ when this matmul began): q, k and v, or gate and up, read
// one normed activation tensor and prepare it once.
Result<const CudaBackend::QuantizedRows*> CudaBackend::quantized_rows(ActFormat f, CUdeviceptr x, int64_t cols,
                                                                      CUdeviceptr row_index, int64_t m, uint64_t entry_epoch) {
  QuantizedRows& c = act_rows_;
  if (c.valid && c.format == f && c.x == x && c.row_index == row_index && c.m == m && c.cols == cols && c.epoch == entry_epoch)
    return &c;
  auto rows = alloc_act_rows(f, x, row_index, m, cols);
  if (!rows) return rows.error();
  c = *rows;
  const memra_status st =
      f == ActFormat::bf16s128
          ? launch("matmul8_act", "memra_prepare_act_fp8_rows", static_cast<unsigned>((m * (cols / 128) + 7) / 8), 1, 256, 0, x,
                   cols, row_index, m, c.q, c.meta)
          : launch("matmul8_act", "memra_quantize_act_q8_rows", static_cast<unsigned>((static_cast<uint64_t>(m * cols / 8) + 255) / 256),
                   1, 256, 0, x, cols, row_index, m, c.q, c.meta);
  if (st != MEMRA_OK) {
    c.valid = false;
    return make_error(ErrorCode::internal, last_error_);
  }
  return &c;
}

memra_status CudaBackend::matmul_prepared(const SchemeInfo& s, CUdeviceptr wd, int64_t rows, int64_t cols, CUdeviceptr xd,
                                          CUdeviceptr row_index, int64_t m, CUdeviceptr od, CUdeviceptr bd, uint64_t entry_epoch) {
  auto a = quantized_rows(s.int8 ? ActFormat::int8x32 : ActFormat::bf16s128, xd, cols, row_index, m, entry_epoch);
  if (!a) return fail(a.error());
  return s.int8 ? matmul_gemv8(s, wd, rows, cols, **a, od, bd, entry_epoch) : matmul_gemv_fp8(s, wd, rows, cols, **a, od, bd, entry_epoch);
}

// y [m][rows] = the INT8-form GEMV over the quantised rows a: a row's bits are the same
// for any m and any launch shape (memra/quant.h), so the registration's table picks by m.
// Recorded (step graph) matmuls over the same quantised rows that follow each other
// directly (q, k, v; gate, up) share one launch (GemvMats, up to 3 matrices; gemv_merge): the
// previous record is replaced by a launch over both, which computes every row the same
// bits (the kernels' order of sums does not depend on the launch), in one ramp.
memra_status CudaBackend::matmul_gemv8(const SchemeInfo& s, CUdeviceptr wd, int64_t rows, int64_t cols, const QuantizedRows& a,
                                       CUdeviceptr od, CUdeviceptr bd, uint64_t entry_epoch) {
  const int64_t m = a.m;
  const DeviceMatmul::Launch& l = s.dev->launch[DeviceMatmul::tile(m)];
  int64_t nt = 1;
  while (nt < std::min<int64_t>(m, 16)) nt *= 2;
  const std::string name = l.kernel + "_r" + std::to_string(l.rows_per_block) + "_t" + std::to_string(nt);
  auto k = scheme_kernel(s, name, true);
  if (!k) return fail(k.error());
  const int64_t row_bytes = static_cast<int64_t>(s.row_bytes);
  const CUdeviceptr qd = a.q, md = a.meta;
  const int64_t groups = (rows + l.rows_per_block - 1) / l.rows_per_block;

  const uint64_t in_lo[2] = {qd, md}, in_hi[2] = {qd + static_cast<uint64_t>(m * cols), md + static_cast<uint64_t>(m * (cols / 32)) * 8u};
  ref::GemvMats arg = gemv_merge(*k, in_lo, in_hi, m, cols, row_bytes, wd, rows, od, bd, groups, entry_epoch);
  const int64_t end = arg.group_end[ref::GemvMats::kMax - 1];
  const int64_t persistent = static_cast<int64_t>(l.blocks_per_sm) * ctx_.multiprocessors();
  const int64_t gx = l.blocks_per_sm > 0 && persistent > 0 ? std::min(end, persistent) : end;
  int64_t rb = row_bytes, c = cols, mm = m;
  CUdeviceptr qa = qd, ma = md;
  void* argv[] = {&arg, &rb, &c, &qa, &ma, &mm};
  const memra_status st = launch_raw(*k, static_cast<unsigned>(gx), static_cast<unsigned>((m + nt - 1) / nt),
                                     static_cast<unsigned>(l.threads), 0, argv);
  if (st != MEMRA_OK) return st;
  gemv_merge_recorded();
  return after_op(name.c_str());
}

// y [m][rows] = the fp8 tensor-core GEMV over the prepared rows a (gemv_mma_fp8.cuh).
memra_status CudaBackend::matmul_gemv_fp8(const SchemeInfo& s, CUdeviceptr wd, int64_t rows, int64_t cols, const QuantizedRows& a,
                                          CUdeviceptr od, CUdeviceptr bd, uint64_t entry_epoch) {
  const int64_t m = a.m;
  const uint64_t in_lo[2] = {a.q, a.meta},
                 in_hi[2] = {a.q + static_cast<uint64_t>(m * cols) * 2u, a.meta + static_cast<uint64_t>(m * (cols / 128)) * 4u};
  const CUdeviceptr x[2] = {a.q, a.meta};  // the bf16 plane, 2^(120 - E) per (token, group)
  return matmul_mma(s, wd, rows, cols, m, x, in_lo, in_hi, od, bd, entry_epoch);
}

// The 16-row tensor-core GEMVs (gemv_mma_bf16.cuh, gemv_mma_fp8.cuh; kernel(ms, cols, xs...,
// m)): 8 or 16 tokens per block, a token's bits the same either way (every n-tile runs
// the same mma sequence per column). Recorded matmuls over the same activation rows that
// follow each other (q, k, v; gate, up) share one launch (gemv_merge; in_lo / in_hi: the
// bytes the activation arguments cover), every row's bits unchanged.
memra_status CudaBackend::matmul_mma(const SchemeInfo& s, CUdeviceptr wd, int64_t rows, int64_t cols, int64_t m,
                                     std::span<const CUdeviceptr> xs, const uint64_t (&in_lo)[2], const uint64_t (&in_hi)[2],
                                     CUdeviceptr od, CUdeviceptr bd, uint64_t entry_epoch) {
  namespace g = memra::gemv_mma;
  const int64_t nt = m > g::kTokens ? 2 : 1;
  const int64_t tiles = (rows + g::kRows - 1) / g::kRows;
  const auto gy = static_cast<unsigned>((m + g::kTokens * nt - 1) / (g::kTokens * nt));
  const std::string kernel = s.mma_kernel + std::to_string(nt);
  auto k = scheme_kernel(s, kernel, true);
  if (!k) return fail(k.error());
  ref::GemvMats arg = gemv_merge(*k, in_lo, in_hi, m, cols, 0, wd, rows, od, bd, tiles, entry_epoch);
  int64_t c = cols, mm = m;
  CUdeviceptr x[2] = {xs[0], xs.size() > 1 ? xs[1] : 0};
  void* argv[5] = {&arg, &c, &x[0], &x[1], &mm};
  if (xs.size() == 1) argv[3] = &mm;
  const memra_status st =
      launch_raw(*k, static_cast<unsigned>(arg.group_end[ref::GemvMats::kMax - 1]), gy, static_cast<unsigned>(32 * s.mma_warps), 0, argv);
  if (st != MEMRA_OK) return st;
  gemv_merge_recorded();
  return after_op(kernel.c_str());
}

const ref::GemvMats& CudaBackend::gemv_merge(const Kernel* k, const uint64_t (&in_lo)[2], const uint64_t (&in_hi)[2], int64_t m,
                                             int64_t cols, int64_t row_bytes, CUdeviceptr w, int64_t rows, CUdeviceptr y,
                                             CUdeviceptr bias, int64_t groups, uint64_t entry_epoch) {
  GemvMerge& g = gemv_merge_;
  const uint64_t o_lo = y, o_hi = y + static_cast<uint64_t>(m * rows) * 4u;
  const auto disjoint = [](uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) { return a1 <= b0 || b1 <= a0; };
  bool merge = options_.fuse_decode && recording_ && g.valid && g.ops == step_ops_.size() && g.epoch == entry_epoch && !step_ops_.empty() &&
               step_ops_.back().kernel == k && g.kernel == k && g.m == m && g.cols == cols && g.row_bytes == row_bytes &&
               g.n < ref::GemvMats::kMax;
  for (int j = 0; merge && j < 2; ++j)
    merge = g.in_lo[j] == in_lo[j] && g.in_hi[j] == in_hi[j] && disjoint(o_lo, o_hi, in_lo[j], in_hi[j]);
  for (int i = 0; merge && i < g.n; ++i) merge = disjoint(o_lo, o_hi, g.out_lo[i], g.out_hi[i]);
  if (!merge) {
    g = GemvMerge{};
    g.kernel = k, g.m = m, g.cols = cols, g.row_bytes = row_bytes;
    for (int j = 0; j < 2; ++j) g.in_lo[j] = in_lo[j], g.in_hi[j] = in_hi[j];
  } else {
    step_ops_.pop_back();  // the previous matmul's launch, re-recorded by the caller with this one
    ++merged_gemv_launches_;
  }
  ref::GemvMats& ms = g.ms;
  const int i = g.n++;
  ms.w[i] = w, ms.y[i] = y, ms.bias[i] = bias, ms.rows[i] = rows;
  g.out_lo[i] = o_lo, g.out_hi[i] = o_hi;
  const int64_t end = (i == 0 ? 0 : ms.group_end[i - 1]) + groups;
  for (int j = i; j < ref::GemvMats::kMax; ++j) ms.group_end[j] = end;
  return ms;
}

// The prompt/generated split of a matmul's m rows, from the step's batch: the batch's
// token rows when m is its token count, its gathered logits rows when m is its
// logits count. (When both counts are equal the token reading is used; the engine's
// logits rows are then the identity.) nullptr: no flags, every row generated.
Result<const DeviceBatch::RowSplit*> CudaBackend::matmul_split(int64_t m) {
  if (batches_.empty()) return static_cast<const DeviceBatch::RowSplit*>(nullptr);
  DeviceBatch& db = *batches_.back();
  const memra_forward_batch* b = db.source;
  if (!b || !MEMRA_STRUCT_HAS(b, memra_forward_batch, prompt_tokens) || !b->prompt_tokens)
    return static_cast<const DeviceBatch::RowSplit*>(nullptr);
  int which = -1;
  if (m == b->num_tokens) which = 0;
  else if (b->logits_rows && m == b->num_logits) which = 1;
  if (which < 0) return static_cast<const DeviceBatch::RowSplit*>(nullptr);
  DeviceBatch::RowSplit& rs = db.row_split[which];
  if (rs.built) return &rs;
  std::vector<int32_t> prompt, generated;
  for (int32_t i = 0; i < static_cast<int32_t>(m); ++i) {
    const int32_t src = which == 0 ? i : b->logits_rows[i];
    if (src < 0 || src >= b->num_tokens) return make_error(ErrorCode::invalid_argument, "matmul: logits row out of range");
    (b->prompt_tokens[src] ? prompt : generated).push_back(i);
  }
  rs.prompt = static_cast<int32_t>(prompt.size());
  rs.generated = static_cast<int32_t>(generated.size());
  if (rs.prompt > 0 && rs.generated > 0) {
    const uint64_t bytes = static_cast<uint64_t>(m) * 4u;
    if (recording_ && !staging_->fits(bytes))
      if (flush_recorded() != MEMRA_OK) return make_error(ErrorCode::internal, last_error_);
    auto host = staging_->alloc(bytes);
    if (!host) return host.error();
    auto* h = static_cast<int32_t*>(*host);
    std::memcpy(h, prompt.data(), prompt.size() * 4);
    std::memcpy(h + prompt.size(), generated.data(), generated.size() * 4);
    auto dev = arena_->alloc(bytes);
    if (!dev) return dev.error();
    if (recording_) {
      (void)record_copy(*dev, h, bytes, true);
    } else {
      const CUresult r = cuMemcpyHtoDAsync(*dev, h, bytes, ctx_.stream());
      if (r != CUDA_SUCCESS) return make_error(ErrorCode::internal, cu_error(r, "row split upload"));
    }
    rs.prompt_rows = *dev;
    rs.generated_rows = *dev + prompt.size() * 4;
  }
  rs.built = true;
  return &rs;
}

memra_status CudaBackend::gemm_buffer(GemmBuffer& b, uint64_t bytes) {
  if (b.bytes >= bytes) return MEMRA_OK;
  // Recorded (not yet issued) launches may use the old buffer: issue them first.
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  bytes = align_up(bytes, 32ull << 20);
  if (b.ptr) cuMemFreeAsync(b.ptr, ctx_.stream());
  b.ptr = 0;
  b.bytes = 0;
  const CUresult r = cuMemAllocAsync(&b.ptr, bytes, ctx_.stream());
  if (r != CUDA_SUCCESS)
    return fail(MEMRA_ERR_OUT_OF_MEMORY, cu_error(r, "cuMemAllocAsync (prefill GEMM scratch)") + ": lower the prefill chunk size");
  b.bytes = bytes;
  return MEMRA_OK;
}

// out[row_index[t]] (or out[t]) = x[row_index[t]] (or x[t]) . W^T + bias for t < m, on
// the tensor cores. Operands follow the registration's GEMM form: bf16 weights as they
// are and dequantised weights rounded to bf16 take bf16 x, one
// pass (cuBLASLt where a row-invariant algorithm exists for the shape, else the own
// GEMM of gemm_mma.cu); f32 and f16 weights take f32 x, both operands split
// into bf16 hi + lo (the own GEMM). Dequantised weights go through planes of at most
// kPlaneBudget bytes, chunked by the weight's shape only.
memra_status CudaBackend::matmul_gemm(const SchemeInfo& s, CUdeviceptr wd, int64_t rows,
                                      int64_t cols, CUdeviceptr xd, int64_t m, CUdeviceptr row_index, CUdeviceptr od,
                                      CUdeviceptr bd) {
  const DeviceMatmul& b = *s.dev;
  const bool one_pass = b.gemm != MEMRA_GEMM_SPLIT;
  const bool dequant = b.gemm != MEMRA_GEMM_STREAMS_BF16;
  CublasLtGemm* lt = one_pass ? cublaslt() : nullptr;
  // cuBLASLt launches on the stream at once: the step's recorded launches go first,
  // and the rest of this prompt step is eager.
  if (lt)
    if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;

  // Activation planes [m][cols]: hi, then lo (split operands).
  const uint64_t plane = align_up(static_cast<uint64_t>(m * cols) * 2u, 256);
  if (const memra_status g = gemm_buffer(gemm_x_, plane * (one_pass ? 1 : 2)); g != MEMRA_OK) return g;
  const CUdeviceptr a_hi = gemm_x_.ptr, a_lo = one_pass ? 0 : gemm_x_.ptr + plane;
  const int64_t lda = cols;
  if (const memra_status g = launch("matmul_gemm", "memra_gemm_split_rows", static_cast<unsigned>(m), 1, 256, 0, xd, cols,
                                    row_index, static_cast<int32_t>(m), lda, a_hi, a_lo);
      g != MEMRA_OK)
    return g;
  // cuBLASLt writes rows in order: gathered rows land in gemm_rows_ (every chunk's, the
  // own GEMM's too) and are scattered at the end.
  const bool staged = lt && row_index;
  if (staged)
    if (const memra_status g = gemm_buffer(gemm_rows_, static_cast<uint64_t>(m * rows) * 4u); g != MEMRA_OK) return g;
  const CUdeviceptr target = staged ? gemm_rows_.ptr : od;
  const CUdeviceptr target_rows = staged ? 0 : row_index;

  const char* kernel = one_pass ? "memra_gemm_fast" : "memra_gemm_precise_wsplit";
  const unsigned smem = one_pass ? kSmemFast : kSmemWsplit;
  const int32_t mi = static_cast<int32_t>(m), ki = static_cast<int32_t>(cols);
  const auto gx = static_cast<unsigned>((m + kGemmTile - 1) / kGemmTile);
  auto product = [&](CUdeviceptr b_hi, CUdeviceptr b_lo, int64_t r0, int64_t nr) -> memra_status {
    const CUdeviceptr o = target + static_cast<CUdeviceptr>(r0) * 4u;
    const CUdeviceptr bias = bd ? bd + static_cast<CUdeviceptr>(r0) * 4u : 0;
    if (lt) {
      auto st = lt->run(b_hi, nr, cols, a_hi, m, o, rows, bias);
      if (st) return MEMRA_OK;
      if (st.error().code != ErrorCode::unsupported) return fail(MEMRA_ERR_DEVICE, st.error().message);
      if (cublaslt_refused_.insert({nr, cols}).second) log(MEMRA_LOG_WARN, st.error().message + "; the backend's own GEMM serves it");
    }
    auto k = modules_->kernel("matmul_gemm", kernel);
    if (!k) return fail(k.error());
    if (const memra_status sm = allow_dynamic_smem(*k, smem); sm != MEMRA_OK) return sm;
    const auto gy = static_cast<unsigned>((nr + kGemmTile - 1) / kGemmTile);
    return launch("matmul_gemm", kernel, gx, gy, kGemmThreads, smem, a_hi, a_lo, lda, mi, b_hi, b_lo, cols,
                  static_cast<int32_t>(nr), ki, o, rows, target_rows, bias);
  };

  memra_status st = MEMRA_OK;
  if (!dequant) {
    st = product(wd, 0, 0, rows);
  } else {
    // Chunks of weight rows dequantized into bf16 planes (hi, and lo when split), then
    // the product over that chunk.
    const uint64_t plane_row = static_cast<uint64_t>(cols) * 2u;
    const uint64_t row_bytes = plane_row * (one_pass ? 1 : 2);
    int64_t chunk = static_cast<int64_t>(kPlaneBudget / row_bytes) / kGemmTile * kGemmTile;
    chunk = std::min(std::max<int64_t>(chunk, kGemmTile), rows);
    const uint64_t wplane = align_up(static_cast<uint64_t>(chunk) * plane_row, 256);
    const std::string& dequantizer = b.gemm_dequant;
    const int64_t unit = b.gemm_unit;
    // cuBLASLt's steps are eager: the plane may be filled on the side stream while the
    // step's stream still runs the ops before this one.
    const bool piped = lt && options_.overlap_dequant && pipe_open() == MEMRA_OK;
    if (!piped)
      if (const memra_status g = gemm_buffer(gemm_w_, wplane * (one_pass ? 1 : 2)); g != MEMRA_OK) return g;
    auto dq = scheme_kernel(s, dequantizer, false);
    if (!dq) return fail(dq.error());
    for (int64_t r0 = 0; r0 < rows && st == MEMRA_OK; r0 += chunk) {
      const int64_t nr = std::min(chunk, rows - r0);
      const int64_t threads = nr * (cols / unit);
      CUdeviceptr wr = wd + static_cast<CUdeviceptr>(r0) * s.row_bytes;
      int64_t row_bytes = static_cast<int64_t>(s.row_bytes), k = cols, ld = cols;
      int32_t nri = static_cast<int32_t>(nr);
      const auto blocks = static_cast<unsigned>((threads + 255) / 256);
      const int p = pipe_.next;  // (piped: the plane this chunk takes)
      if (piped) {
        pipe_.next ^= 1;
        if ((st = pipe_plane(p, wplane * (one_pass ? 1 : 2))) != MEMRA_OK) break;
      }
      const CUdeviceptr plane = piped ? pipe_.planes[p].ptr : gemm_w_.ptr;
      CUdeviceptr w_hi = plane, w_lo = one_pass ? 0 : plane + wplane;
      void* argv[] = {&wr, &row_bytes, &nri, &k, &ld, &w_hi, &w_lo};
      if (!piped) {
        st = launch_raw(*dq, blocks, 1, 256, 0, argv);
        if (st == MEMRA_OK) st = after_op(dequantizer.c_str());
        if (st == MEMRA_OK) st = product(w_hi, w_lo, r0, nr);
        continue;
      }
      if ((st = pipe_launch(p, *dq, blocks, 256, argv)) != MEMRA_OK) break;
      if (const CUresult r = cuStreamWaitEvent(ctx_.stream(), pipe_.ready[p], 0); r != CUDA_SUCCESS) {
        st = fail(MEMRA_ERR_DEVICE, cu_error(r, "prompt GEMM: waiting for the weight plane"));
        break;
      }
      if ((st = product(w_hi, w_lo, r0, nr)) != MEMRA_OK) break;
      if (const CUresult r = cuEventRecord(pipe_.read[p], ctx_.stream()); r != CUDA_SUCCESS) {
        st = fail(MEMRA_ERR_DEVICE, cu_error(r, "prompt GEMM: marking the weight plane read"));
        break;
      }
      pipe_.read_pending[p] = true;
    }
  }
  if (st != MEMRA_OK || !staged) return st;
  return launch("matmul_gemm", "memra_gemm_scatter_rows", static_cast<unsigned>(m), 1, 256, 0, gemm_rows_.ptr, rows, row_index, od);
}

memra_status CudaBackend::pipe_open() {
  if (pipe_.side) return MEMRA_OK;
  CUresult r = cuStreamCreate(&pipe_.side, CU_STREAM_NON_BLOCKING);
  for (int i = 0; i < 2 && r == CUDA_SUCCESS; ++i) {
    r = cuEventCreate(&pipe_.ready[i], CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS) r = cuEventCreate(&pipe_.read[i], CU_EVENT_DISABLE_TIMING);
  }
  if (r != CUDA_SUCCESS) {
    pipe_close();
    log(MEMRA_LOG_WARN, cu_error(r, "prompt GEMM side stream") + "; weight planes are filled on the step's stream");
    options_.overlap_dequant = false;
    return MEMRA_ERR_DEVICE;
  }
  return MEMRA_OK;
}

void CudaBackend::pipe_close() {
  if (pipe_.side) cuStreamSynchronize(pipe_.side);
  for (int i = 0; i < 2; ++i) {
    if (pipe_.planes[i].ptr) cuMemFree(pipe_.planes[i].ptr);
    pipe_.planes[i] = {};
    if (pipe_.ready[i]) cuEventDestroy(pipe_.ready[i]);
    if (pipe_.read[i]) cuEventDestroy(pipe_.read[i]);
    pipe_.ready[i] = pipe_.read[i] = nullptr;
    pipe_.read_pending[i] = false;
  }
  if (pipe_.side) cuStreamDestroy(pipe_.side);
  pipe_.side = nullptr;
}

memra_status CudaBackend::pipe_plane(int b, uint64_t bytes) {
  GemmBuffer& g = pipe_.planes[b];
  if (g.bytes >= bytes) return MEMRA_OK;
  // Rare (planes only grow): both streams drained, then a plain allocation either stream may use.
  if (auto w = ctx_.synchronize(); !w) return fail(w.error());
  if (const CUresult r = cuStreamSynchronize(pipe_.side); r != CUDA_SUCCESS)
    return fail(MEMRA_ERR_DEVICE, cu_error(r, "prompt GEMM side stream"));
  if (g.ptr) cuMemFree(g.ptr);
  g = {};
  bytes = align_up(bytes, 32ull << 20);
  if (const CUresult r = cuMemAlloc(&g.ptr, bytes); r != CUDA_SUCCESS)
    return fail(MEMRA_ERR_OUT_OF_MEMORY, cu_error(r, "cuMemAlloc (prompt GEMM weight plane)") + ": lower the prefill chunk size");
  g.bytes = bytes;
  pipe_.read_pending[b] = false;
  return MEMRA_OK;
}

memra_status CudaBackend::pipe_launch(int b, Kernel* k, unsigned gx, unsigned block, void** args) {
  if (pipe_.read_pending[b])
    if (const CUresult r = cuStreamWaitEvent(pipe_.side, pipe_.read[b], 0); r != CUDA_SUCCESS)
      return fail(MEMRA_ERR_DEVICE, cu_error(r, "prompt GEMM: waiting for the plane's last product"));
  if (profile_ && profile_step_) {  // MEMRA_CUDA_PROFILE: the launch's span, on the side stream
    if (const memra_status st = profile_launch(k, gx, 1, block, 0, args, pipe_.side); st != MEMRA_OK) return st;
  } else if (const CUresult r = cuLaunchKernel(k->function, gx, 1, 1, block, 1, 1, 0, pipe_.side, args, nullptr); r != CUDA_SUCCESS) {
    return fail(MEMRA_ERR_DEVICE, cu_error(r, ("launch " + k->name).c_str()));
  }
  if (const CUresult e = cuEventRecord(pipe_.ready[b], pipe_.side); e != CUDA_SUCCESS)
    return fail(MEMRA_ERR_DEVICE, cu_error(e, "prompt GEMM: marking the weight plane filled"));
  if (sync_each_op_)
    if (const CUresult w = cuStreamSynchronize(pipe_.side); w != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(w, k->name.c_str()));
  return MEMRA_OK;
}

CublasLtGemm* CudaBackend::cublaslt() {
  if (!cublaslt_opened_) {
    cublaslt_opened_ = true;
    if (options_.cublaslt != "off") {
      std::string why;
      cublaslt_ = CublasLtGemm::open(options_.cublaslt, ctx_.stream(), &why);
      log(cublaslt_ ? MEMRA_LOG_INFO : MEMRA_LOG_WARN,
          cublaslt_ ? "single-pass prompt GEMM (bf16 operands) through cuBLASLt (" + cublaslt_->library() + ")"
                    : "cuBLASLt unavailable (" + why + "); single-pass prompt rows use the backend's own GEMM");
    }
  }
  return cublaslt_.get();
}

}  // namespace memra::backend::cuda
