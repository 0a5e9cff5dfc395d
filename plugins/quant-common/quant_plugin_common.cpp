#include "quant_plugin_common.hpp"

#include <cstddef>
#include <cstring>
#include <new>
#include <exception>
#include <string>
#include <vector>

#include "plugins/quant-common/gemv_int8_launch.hpp"
#include "plugins/quant-common/gemv_int8_ref.hpp"
#include "kernels/matmul/gemv_mats.hpp"
#include "kernels/matmul/gemv_mma_layout.hpp"
#include "kernels/matmul/matmul_ref.hpp"
#include "repack/quant/dequant.hpp"
#include "repack/quant/fp_convert.hpp"
#include "repack/quant/ggml_type.hpp"
#include "plugins/quant-common/quantize.hpp"

#define MEMRA_TRY_STATUS(expr)                   \
  do {                                           \
    if (const memra_status st_ = (expr); st_ != MEMRA_OK) return st_; \
  } while (0)

// The SDK's memra_gemv_mats (kernels built against the SDK alone) is the backend's GemvMats.
static_assert(sizeof(memra_gemv_mats) == sizeof(memra::ref::GemvMats) && MEMRA_GEMV_MATS_MAX == memra::ref::GemvMats::kMax);
static_assert(offsetof(memra_gemv_mats, y) == offsetof(memra::ref::GemvMats, y) &&
              offsetof(memra_gemv_mats, bias) == offsetof(memra::ref::GemvMats, bias) &&
              offsetof(memra_gemv_mats, rows) == offsetof(memra::ref::GemvMats, rows) &&
              offsetof(memra_gemv_mats, group_end) == offsetof(memra::ref::GemvMats, group_end));

namespace memra::quant_plugin {
namespace {


// memra's fp8 layout v1: per row, cols/128 float32 scales then cols e4m3fn bytes;
// value = e4m3(q) * scale of its 128-column group. Represents per-channel and
// 128x128-block scaled checkpoints exactly.
constexpr int64_t kFp8Group = 128;

struct Scheme {
  bool fp8 = false;
  quant::GgmlType type = quant::GgmlType::F32;
};

bool lookup(const memra_plugin_ctx* ctx, const char* scheme, Scheme& out) {
  if (!ctx || !scheme || !handles(ctx->handled, scheme)) return false;
  if (std::strcmp(scheme, "fp8") == 0) {
    out.fp8 = true;
    return true;
  }
  std::string upper(scheme);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return quant::ggml_type_from_name(upper, &out.type);
}

bool row_bytes(const Scheme& s, int64_t cols, uint64_t* out) {
  if (cols <= 0) return false;
  if (s.fp8) {
    if (cols % kFp8Group != 0) return false;
    *out = static_cast<uint64_t>(cols / kFp8Group) * 4u + static_cast<uint64_t>(cols);
    return true;
  }
  return quant::ggml_row_bytes(static_cast<uint32_t>(s.type), static_cast<uint64_t>(cols), out);
}

void dequantize_one_row(const Scheme& s, const uint8_t* src, int64_t cols, float* dst) {
  if (s.fp8) {
    const int64_t groups = cols / kFp8Group;
    const uint8_t* q = src + groups * 4;
    for (int64_t g = 0; g < groups; ++g) {
      float scale;
      std::memcpy(&scale, src + g * 4, 4);
      for (int64_t i = 0; i < kFp8Group; ++i) dst[g * kFp8Group + i] = quant::f8_e4m3_to_f32(q[g * kFp8Group + i]) * scale;
    }
    return;
  }
  quant::dequantize_row(s.type, src, dst, cols);
}


}  // namespace

memra_status report(memra_plugin_ctx* ctx, memra_status code, const std::string& message) {
  if (ctx && ctx->host && ctx->host->error_report) return ctx->host->error_report(ctx->host->ctx, code, message.c_str());
  return code;
}

bool handles(const char* const* handled, const char* scheme) {
  for (const char* const* h = handled; h && *h; ++h)
    if (std::strcmp(*h, scheme) == 0) return true;
  return false;
}

memra_status init(const memra_host_api* host, memra_plugin_api* out, const char* const* handled, const char* plugin_name,
                  const SchemeDef* schemes, size_t scheme_count, const memra_quant_api* api) {
  if (!host || !out || !MEMRA_STRUCT_HAS(out, memra_plugin_api, shutdown)) return MEMRA_ERR_ABI_MISMATCH;
  for (const char* const* h = handled; h && *h; ++h) {
    bool stated = false;
    for (size_t i = 0; i < scheme_count; ++i) stated = stated || std::strcmp(schemes[i].name, *h) == 0;
    if (!stated && host->error_report)
      return host->error_report(host->ctx, MEMRA_ERR_INTERNAL, (std::string(plugin_name) + ": no SchemeDef for '" + *h + "'").c_str());
  }
  auto* ctx = new (std::nothrow) memra_plugin_ctx{host, handled, plugin_name, schemes, scheme_count};
  if (!ctx) return MEMRA_ERR_OUT_OF_MEMORY;
  out->kind = MEMRA_PLUGIN_KIND_QUANT;
  out->ctx = ctx;
  out->quant = api ? api : &kQuantApi;
  out->shutdown = [](memra_plugin_ctx* c) { delete c; };
  return MEMRA_OK;
}

int32_t score_cpu_and_cuda(const memra_device_info* device, const char*) {
  // CPU paths exist for every scheme; on CUDA the backend's built-in kernels serve these
  // schemes (its kernel registry), so the plugin supplies layout and quantiser there.
  if (!device) return -1;
  return device->backend == MEMRA_BACKEND_CPU || device->backend == MEMRA_BACKEND_CUDA ? 10 : -1;
}

memra_status weight_bytes(memra_plugin_ctx* ctx, const char* scheme, int64_t rows, int64_t cols, uint64_t* out) {
  return guarded(ctx, [&] {
    Scheme s;
    if (!out || rows <= 0 || !lookup(ctx, scheme, s)) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, std::string(ctx->name) + ": unknown scheme or bad shape");
    uint64_t rb = 0;
    if (!row_bytes(s, cols, &rb))
      return report(ctx, MEMRA_ERR_UNSUPPORTED, std::string(ctx->name) + ": " + scheme + " cannot hold rows of " + std::to_string(cols) + " columns (block size)");
    *out = rb * static_cast<uint64_t>(rows);
    return MEMRA_OK;
  });
}

memra_status quantize(memra_plugin_ctx* ctx, const char* scheme, const float* src, int64_t rows, int64_t cols, void* dst, uint64_t dst_bytes) {
  return guarded(ctx, [&] {
    Scheme s;
    if (!src || !dst || !lookup(ctx, scheme, s)) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, std::string(ctx->name) + ": bad quantize arguments");
    uint64_t rb = 0;
    if (!row_bytes(s, cols, &rb) || dst_bytes < rb * static_cast<uint64_t>(rows))
      return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, std::string(ctx->name) + ": destination too small");
    auto* d = static_cast<uint8_t*>(dst);
    const int64_t n = rows * cols;
    if (!s.fp8 && s.type == quant::GgmlType::F32) {
      std::memcpy(d, src, static_cast<size_t>(n) * 4);
      return MEMRA_OK;
    }
    if (!s.fp8 && (s.type == quant::GgmlType::F16 || s.type == quant::GgmlType::BF16)) {
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = s.type == quant::GgmlType::F16 ? quant::f32_to_fp16(src[i]) : quant::f32_to_bf16(src[i]);
        std::memcpy(d + i * 2, &h, 2);
      }
      return MEMRA_OK;
    }
    // Block schemes: memra_quantize (the quantizers memra-repack uses), byte-identical output.
    quant::QuantScheme qs;
    if (!quant::parse_scheme(scheme, &qs))
      return report(ctx, MEMRA_ERR_UNSUPPORTED, std::string(ctx->name) + ": no quantizer for " + scheme + "; memra-repack can write " +
                                               "q8_0, q6_k, q5_k, q4_k, iq4_xs, q4_0 and fp8");
    std::string error;
    if (!quant::quantize_rows(qs, src, rows, cols, d, dst_bytes, &error))
      return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, std::string(ctx->name) + ": " + error);
    return MEMRA_OK;
  });
}

memra_status dequantize(memra_plugin_ctx* ctx, const char* scheme, const void* src, uint64_t src_bytes, int64_t rows, int64_t cols, float* dst) {
  return guarded(ctx, [&] {
    Scheme s;
    if (!src || !dst || !lookup(ctx, scheme, s)) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, std::string(ctx->name) + ": bad dequantize arguments");
    uint64_t rb = 0;
    if (!row_bytes(s, cols, &rb) || src_bytes < rb * static_cast<uint64_t>(rows))
      return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, std::string(ctx->name) + ": source smaller than rows x cols");
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t r = 0; r < rows; ++r) dequantize_one_row(s, p + rb * static_cast<uint64_t>(r), cols, dst + r * cols);
    return MEMRA_OK;
  });
}

memra_status matmul(memra_plugin_ctx* ctx, const memra_matmul_args* a) {
  return guarded(ctx, [&] {
    if (!MEMRA_STRUCT_HAS(a, memra_matmul_args, stream)) return report(ctx, MEMRA_ERR_ABI_MISMATCH, "matmul: args struct too small");
    if (a->backend != MEMRA_BACKEND_CPU) return report(ctx, MEMRA_ERR_UNSUPPORTED, std::string(ctx->name) + ": no CUDA matmul in this build");
    Scheme s;
    uint64_t rb = 0;
    if (!lookup(ctx, a->scheme, s) || !row_bytes(s, a->cols, &rb)) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "matmul: bad scheme or shape");
    if (ref::int8_activation_matmul(a->scheme, a->cols)) {
      // Integer schemes (numeric contract v2, docs/ARCHITECTURE.md "Per-scheme numerics"):
      // each activation row quantised to int8 blocks, integer dots, the kernels' f32 order.
      // (The CPU backend sends prompt rows to its bf16-operand path instead: host/backend/cpu.)
      ref::Int8Scheme is;
      ref::int8_scheme(a->scheme, &is);
      std::vector<int8_t> q(static_cast<size_t>(a->m * a->cols));
      std::vector<float> meta(static_cast<size_t>(a->m * (a->cols / ref::kInt8Block) * 2));
      if (!ref::quantize_act_q8(a->x, a->m, a->cols, q.data(), meta.data()) ||
          !ref::gemv_int8(is, static_cast<const uint8_t*>(a->weight), a->rows, a->cols, q.data(), meta.data(), a->m, nullptr, a->y))
        return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "matmul: bad int8 shape");
      return MEMRA_OK;
    }
    // bf16 weights take bf16 activations (every row): the products are exact in f32 and
    // summed in index order, the single-pass tensor-core GEMM's operands.
    std::vector<float> rounded;
    const float* x = a->x;
    if (ref::bf16_activation_matmul(a->scheme)) {
      rounded = ref::bf16_rounded(a->x, a->m * a->cols);
      x = rounded.data();
    }
    std::vector<float> w(static_cast<size_t>(a->cols));
    const auto* base = static_cast<const uint8_t*>(a->weight);
    for (int64_t r = 0; r < a->rows; ++r) {
      dequantize_one_row(s, base + rb * static_cast<uint64_t>(r), a->cols, w.data());
      for (int64_t t = 0; t < a->m; ++t) {
        a->y[t * a->rows + r] = ref::dot_f32(x + t * a->cols, w.data(), a->cols);
      }
    }
    return MEMRA_OK;
  });
}

namespace {

const SchemeDef* scheme_def(const memra_plugin_ctx* ctx, const char* scheme) {
  if (!ctx || !scheme) return nullptr;
  for (size_t i = 0; i < ctx->scheme_count; ++i)
    if (std::strcmp(ctx->schemes[i].name, scheme) == 0) return &ctx->schemes[i];
  return nullptr;
}

memra_matmul_kernels blank_kernels(memra_kernel_module* module, const SchemeDef& d) {
  memra_matmul_kernels k{};
  k.struct_size = MEMRA_MATMUL_KERNELS_STRUCT_SIZE;
  k.module = module;
  k.block_elems = d.block_elems;
  k.block_bytes = d.block_bytes;
  return k;
}

// One registration: the descriptor around k for the registrar's device.
memra_status add(memra_plugin_ctx* ctx, const memra_kernel_registrar* r, const char* scheme, const char* activation, int32_t score,
                 const memra_matmul_kernels& k) {
  memra_kernel_desc desc{};
  desc.struct_size = MEMRA_KERNEL_DESC_STRUCT_SIZE;
  desc.op = "matmul";
  desc.scheme = scheme;
  desc.activation = activation;
  desc.arch = r->device->arch;
  desc.score = score;
  desc.kernels = &k;
  const memra_status st = r->add(r->registry, &desc);
  if (st != MEMRA_OK) return report(ctx, st, std::string(ctx->name) + ": the registry refused the " + activation + " kernels of " + scheme);
  return MEMRA_OK;
}

}  // namespace

// The CUDA kernels of each handled scheme, from the modules this plugin ships beside its
// .so (built from its own folder), by the conventions of memra_matmul_kernels.
memra_status register_kernels(memra_plugin_ctx* ctx, const memra_kernel_registrar* r) {
  return guarded(ctx, [&]() -> memra_status {
    if (!r || !MEMRA_STRUCT_HAS(r, memra_kernel_registrar, add) || !r->device) return report(ctx, MEMRA_ERR_ABI_MISMATCH, "register_kernels: bad registrar");
    if (r->device->backend != MEMRA_BACKEND_CUDA) return MEMRA_OK;
    std::vector<std::pair<std::string, memra_kernel_module*>> loaded;
    auto module = [&](const std::string& name, memra_kernel_module** out) -> memra_status {
      for (const auto& [n, m] : loaded)
        if (n == name) return *out = m, MEMRA_OK;
      const memra_status st = ctx->host->kernel_module_load(ctx->host->ctx, name.c_str(), out);
      if (st != MEMRA_OK) return st;  // the host reported why
      loaded.emplace_back(name, *out);
      return MEMRA_OK;
    };
    for (size_t i = 0; i < ctx->scheme_count; ++i) {
      const SchemeDef& d = ctx->schemes[i];
      const std::string s = d.name;
      memra_kernel_module* m = nullptr;
      switch (d.kernels) {
        case Kernels::none:
          break;
        case Kernels::float_rows: {  // f32, f16: f32 rows; prompt rows split into bf16 hi + lo
          MEMRA_TRY_STATUS(module("matmul_float", &m));
          memra_matmul_kernels k = blank_kernels(m, d);
          const std::string gemv = "memra_gemv_" + s, dq = "memra_gemm_dequant_" + s, emb = "memra_embedding_" + s;
          k.gemv_form = MEMRA_GEMV_ROWS, k.by_alignment = 1, k.gemv = gemv.c_str(), k.pdl = 1;
          k.gemm = MEMRA_GEMM_SPLIT, k.gemm_dequant = dq.c_str(), k.gemm_unit = 8, k.embedding = emb.c_str();
          MEMRA_TRY_STATUS(add(ctx, r, d.name, MEMRA_ACT_F32, 100, k));
          break;
        }
        case Kernels::bf16: {  // bf16 rows on every row; prompt rows stream the weights
          MEMRA_TRY_STATUS(module("matmul_float", &m));
          memra_matmul_kernels k = blank_kernels(m, d);
          k.gemv_form = MEMRA_GEMV_MMA16, k.gemv = "memra_gemv_bf16", k.mma_warps = memra::gemv_mma::kWarps, k.pdl = 1;
          k.cols_multiple = 8, k.gemm = MEMRA_GEMM_STREAMS_BF16, k.embedding = "memra_embedding_bf16_u8";
          MEMRA_TRY_STATUS(add(ctx, r, d.name, MEMRA_ACT_BF16, 110, k));
          memra_matmul_kernels u = blank_kernels(m, d);  // other row lengths: the _u1 GEMV
          u.gemv_form = MEMRA_GEMV_ROWS, u.by_alignment = 1, u.gemv = "memra_gemv_bf16", u.pdl = 1;
          u.gemm = MEMRA_GEMM_STREAMS_BF16, u.embedding = "memra_embedding_bf16";
          MEMRA_TRY_STATUS(add(ctx, r, d.name, MEMRA_ACT_BF16, 100, u));
          break;
        }
        case Kernels::fp8: {  // bf16s128 rows on the tensor-core GEMV; prompt rows rounded weights
          MEMRA_TRY_STATUS(module("matmul_fp8", &m));
          memra_matmul_kernels k = blank_kernels(m, d);
          k.gemv_form = MEMRA_GEMV_MMA16, k.gemv = "memra_gemv_fp8", k.mma_warps = memra::gemv_mma::kFp8Warps, k.pdl = 1;
          k.gemm = MEMRA_GEMM_BF16, k.gemm_dequant = "memra_gemm_dequant_fp8", k.gemm_unit = 32;
          MEMRA_TRY_STATUS(add(ctx, r, d.name, MEMRA_ACT_BF16S128, 100, k));
          break;
        }
        case Kernels::block: {
          const std::string gemv = "memra_gemv_" + s, dq = "memra_gemm_dequant_" + s, emb = "memra_embedding_" + s;
          MEMRA_TRY_STATUS(module("matmul_" + s, &m));
          memra_matmul_kernels k = blank_kernels(m, d);
          k.gemv_form = MEMRA_GEMV_ROWS, k.gemv = gemv.c_str(), k.pdl = d.rows_pdl ? 1 : 0;
          k.gemm = MEMRA_GEMM_BF16, k.gemm_dequant = dq.c_str(), k.gemm_unit = 8, k.embedding = emb.c_str();
          MEMRA_TRY_STATUS(add(ctx, r, d.name, MEMRA_ACT_F32, 100, k));
          if (!d.int8) break;
          // Rows of whole 256-element runs: int8x32 activations on the integer GEMVs.
          MEMRA_TRY_STATUS(module("matmul8_" + s, &m));
          memra_matmul_kernels q = blank_kernels(m, d);
          q.cols_multiple = 256, q.gemv_form = MEMRA_GEMV_INT8, q.pdl = 1;
          std::string stems[5];
          for (int t = 0; t < 5; ++t) {
            const ref::Int8GemvLaunch l = ref::int8_gemv_launch(d.name, int64_t{1} << t);
            stems[t] = std::string("memra_gemv8_") + l.kernel;
            q.launch[t] = {stems[t].c_str(), l.rows_per_block, l.blocks_per_sm, ref::int8_gemv_block_threads(l.kernel)};
          }
          q.gemm = MEMRA_GEMM_BF16, q.gemm_dequant = dq.c_str(), q.gemm_unit = 8, q.embedding = emb.c_str();
          MEMRA_TRY_STATUS(add(ctx, r, d.name, MEMRA_ACT_INT8X32, 110, q));
          break;
        }
      }
    }
    return MEMRA_OK;
  });
}

memra_status scheme_info(memra_plugin_ctx* ctx, const char* scheme, memra_scheme_info* out) {
  const SchemeDef* d = scheme_def(ctx, scheme);
  if (!d || !out || !MEMRA_STRUCT_HAS(out, memra_scheme_info, prompt))
    return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, std::string(ctx ? ctx->name : "quant") + ": scheme_info: unknown scheme or bad struct");
  out->block_elems = d->block_elems;
  out->block_bytes = d->block_bytes;
  out->prompt = d->prompt;
  if (MEMRA_STRUCT_HAS(out, memra_scheme_info, keep_as_stored)) {
    out->repack = d->repack;
    out->sensitive = d->sensitive;
    out->fallback = d->fallback;
    out->keep_as_stored = d->keep_as_stored;
  }
  return MEMRA_OK;
}

const memra_quant_api kQuantApi = {MEMRA_QUANT_API_STRUCT_SIZE, weight_bytes, quantize, dequantize, matmul, register_kernels, scheme_info,
                                   nullptr};

}  // namespace memra::quant_plugin
