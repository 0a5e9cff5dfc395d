// quant-nvfp4: NVIDIA's NVFP4 (e2m1 values, an e4m3 scale per 16 elements, a float32 scale per
// tensor) in memra's nvfp4 layout v1 (nvfp4_layout.hpp). The plugin owns all of it: layout
// and exact CPU reference (nvfp4_ref.cpp), the quantiser memra-repack -q nvfp4 uses, the
// importer of ModelOpt's safetensors form (weight uint8 [N][K/2], weight_scale F8_E4M3
// [N][K/16], weight_scale_2 F32 scalar, input_scale F32 scalar), and its CUDA kernels
// (matmul_nvfp4.fatbin beside the plugin: the f32-row GEMV decoding the codes in software
// on every GPU, the prompt GEMM's dequantiser and the embedding gather).
// Numerics: generated rows multiply float32 activations by the exact weights (fixed order);
// prompt rows use the weights rounded to bf16 (MEMRA_PROMPT_ROUNDED_WEIGHTS).
#include <cstdio>
#include <cstring>
#include <vector>

#include "import_helpers.hpp"
#include "kernels/matmul/matmul_ref.hpp"
#include "nvfp4_ref.hpp"
#include "quant_plugin_common.hpp"

namespace {
namespace q = memra::quant_plugin;
namespace n4 = memra::nvfp4;
using q::Kernels;
using q::SchemeDef;

const SchemeDef kSchemes[] = {
    // ModelOpt keeps the embeddings and the head in 16-bit; rows that break the 256-element
    // block go to q8_0.
    {"nvfp4", n4::kBlockElems, n4::kBlockBytes, MEMRA_PROMPT_ROUNDED_WEIGHTS, Kernels::block, false, true, MEMRA_REPACK_QUANT,
     nullptr, "q8_0", MEMRA_KEEP_TOKEN_EMBD | MEMRA_KEEP_HEAD},
};

bool ours(const memra_plugin_ctx* ctx, const char* scheme) { return ctx && scheme && q::handles(ctx->handled, scheme); }

memra_status bad(memra_plugin_ctx* ctx, memra_status code, const std::string& why) {
  return q::report(ctx, code, std::string(ctx ? ctx->name : "nvfp4") + ": " + why);
}

memra_status weight_bytes(memra_plugin_ctx* ctx, const char* scheme, int64_t rows, int64_t cols, uint64_t* out) {
  if (!out || rows <= 0 || !ours(ctx, scheme)) return bad(ctx, MEMRA_ERR_INVALID_ARGUMENT, "unknown scheme or bad shape");
  const uint64_t rb = n4::row_bytes(cols);
  if (rb == 0)
    return bad(ctx, MEMRA_ERR_UNSUPPORTED, "nvfp4 cannot hold rows of " + std::to_string(cols) + " columns (blocks of 256)");
  *out = rb * static_cast<uint64_t>(rows);
  return MEMRA_OK;
}

memra_status quantize(memra_plugin_ctx* ctx, const char* scheme, const float* src, int64_t rows, int64_t cols, void* dst,
                      uint64_t dst_bytes) {
  return q::guarded(ctx, [&] {
    const uint64_t rb = n4::row_bytes(cols);
    if (!src || !dst || !ours(ctx, scheme) || rb == 0 || dst_bytes < rb * static_cast<uint64_t>(rows))
      return bad(ctx, MEMRA_ERR_INVALID_ARGUMENT, "bad quantize arguments");
    n4::quantize_rows(src, rows, cols, static_cast<uint8_t*>(dst));
    return MEMRA_OK;
  });
}

memra_status dequantize(memra_plugin_ctx* ctx, const char* scheme, const void* src, uint64_t src_bytes, int64_t rows, int64_t cols,
                        float* dst) {
  return q::guarded(ctx, [&] {
    const uint64_t rb = n4::row_bytes(cols);
    if (!src || !dst || !ours(ctx, scheme) || rb == 0 || src_bytes < rb * static_cast<uint64_t>(rows))
      return bad(ctx, MEMRA_ERR_INVALID_ARGUMENT, "bad dequantize arguments");
    for (int64_t r = 0; r < rows; ++r) n4::dequantize_row(static_cast<const uint8_t*>(src) + rb * r, cols, dst + r * cols);
    return MEMRA_OK;
  });
}

// The CPU reference: each weight row dequantised exactly, float32 dot in index order.
memra_status matmul(memra_plugin_ctx* ctx, const memra_matmul_args* a) {
  return q::guarded(ctx, [&] {
    if (!MEMRA_STRUCT_HAS(a, memra_matmul_args, stream)) return bad(ctx, MEMRA_ERR_ABI_MISMATCH, "matmul: args struct too small");
    if (a->backend != MEMRA_BACKEND_CPU) return bad(ctx, MEMRA_ERR_UNSUPPORTED, "the GPU runs nvfp4 through its registered kernels");
    const uint64_t rb = n4::row_bytes(a->cols);
    if (!ours(ctx, a->scheme) || rb == 0) return bad(ctx, MEMRA_ERR_INVALID_ARGUMENT, "matmul: bad scheme or shape");
    std::vector<float> w(static_cast<size_t>(a->cols));
    const auto* base = static_cast<const uint8_t*>(a->weight);
    for (int64_t r = 0; r < a->rows; ++r) {
      n4::dequantize_row(base + rb * static_cast<uint64_t>(r), a->cols, w.data());
      for (int64_t t = 0; t < a->m; ++t) a->y[t * a->rows + r] = memra::ref::dot_f32(a->x + t * a->cols, w.data(), a->cols);
    }
    return MEMRA_OK;
  });
}

// ModelOpt's NVFP4 linear weight, checked whole at match; written block by block.
struct Form {
  const char* scheme = "nvfp4";
  const memra_checkpoint_tensor *scale = nullptr, *global = nullptr;
  int64_t rows = 0, cols = 0;
  uint64_t used = 0, row_bytes = 0;
};

memra_status match(memra_plugin_ctx* ctx, const memra_import_args& a, Form* f) {
  namespace im = q::import;
  const memra_checkpoint_tensor& w = *a.weight;
  size_t si = 0, gi = 0, ii = 0;
  const memra_checkpoint_tensor* s = im::sibling(a, "weight_scale", &si);
  const memra_checkpoint_tensor* g = im::sibling(a, "weight_scale_2", &gi);
  if (!w.dtype || std::strcmp(w.dtype, "U8") != 0 || !s || !g) return MEMRA_ERR_UNSUPPORTED;
  const std::string who = im::describe(w);
  if (w.ndim != 2 || w.shape[0] <= 0 || w.shape[1] <= 0 || w.bytes != static_cast<uint64_t>(w.shape[0] * w.shape[1]))
    return bad(ctx, MEMRA_ERR_INVALID_ARGUMENT, who + ": NVFP4 codes must be a 2-D uint8 matrix [N][K/2]");
  f->rows = w.shape[0], f->cols = 2 * w.shape[1];
  f->row_bytes = n4::row_bytes(f->cols);
  if (f->cols % n4::kBlockElems != 0)
    return bad(ctx, MEMRA_ERR_INVALID_ARGUMENT, who + ": rows of " + std::to_string(f->cols) +
                                                    " elements break memra's nvfp4 block of 256 (repack with --quant keep is not possible; "
                                                    "this layer cannot be served in nvfp4)");
  if (!s->dtype || std::strcmp(s->dtype, "F8_E4M3") != 0 || s->ndim != 2 || s->shape[0] != f->rows ||
      s->shape[1] != f->cols / n4::kSubBlock || !im::float_dtype(*s))
    return bad(ctx, MEMRA_ERR_INVALID_ARGUMENT, im::describe(*s) + ": the block scales of " + who + " must be F8_E4M3 [" +
                                                    std::to_string(f->rows) + ", " + std::to_string(f->cols / n4::kSubBlock) + "]");
  if (!im::float_dtype(*g) || std::strcmp(g->dtype, "F8_E4M3") == 0 || im::elements(*g) != 1 || g->ndim > 1)
    return bad(ctx, MEMRA_ERR_INVALID_ARGUMENT, im::describe(*g) + ": the second-level scale of " + who + " must be one F32 value");
  std::string why;
  if (!im::all_finite(*s, &why) || !im::all_finite(*g, &why)) return bad(ctx, MEMRA_ERR_INVALID_ARGUMENT, why);
  f->scale = s, f->global = g;
  f->used = (uint64_t{1} << si) | (uint64_t{1} << gi);
  if (const memra_checkpoint_tensor* in = im::sibling(a, "input_scale", &ii)) {
    if (!im::float_dtype(*in) || im::elements(*in) != 1 || !im::all_finite(*in, &why))
      return bad(ctx, MEMRA_ERR_INVALID_ARGUMENT, im::describe(*in) + ": an input scale must be one finite float");
    f->used |= uint64_t{1} << ii;  // the W4A4 activation scale; memra keeps activations as they are
  }
  return MEMRA_OK;
}

memra_status import_tensor(memra_plugin_ctx* ctx, memra_import_args* a) {
  return q::import::run_import<Form>(
      ctx, a, [&](const memra_import_args& args, Form* f) { return match(ctx, args, f); },
      [&](const Form& f, uint8_t* out) {
        const float g = q::import::float_at(*f.global, 0);
        const auto* codes = static_cast<const uint8_t*>(a->weight->data);
        const auto* scales = static_cast<const uint8_t*>(f.scale->data);
        const int64_t blocks = f.cols / n4::kBlockElems, subs = n4::kBlockElems / n4::kSubBlock;
        for (int64_t r = a->row0; r < a->row0 + a->row_count; ++r)
          for (int64_t b = 0; b < blocks; ++b, out += n4::kBlockBytes) {
            std::memcpy(out, &g, 4);
            std::memcpy(out + n4::kScalesAt, scales + r * (f.cols / n4::kSubBlock) + b * subs, static_cast<size_t>(subs));
            std::memcpy(out + n4::kCodesAt, codes + r * (f.cols / 2) + b * (n4::kBlockElems / 2), n4::kBlockElems / 2);
          }
        return MEMRA_OK;
      });
}

const memra_quant_api kNvfp4Api = {MEMRA_QUANT_API_STRUCT_SIZE, weight_bytes,   quantize,     dequantize, matmul,
                                   q::register_kernels,         q::scheme_info, import_tensor};
}  // namespace

MEMRA_DEFINE_QUANT_PLUGIN_API("nvfp4", "NVIDIA NVFP4: e2m1 with e4m3 scales per 16 and a float32 scale (memra nvfp4 layout v1)",
                              kSchemes, kNvfp4Api, "nvfp4")
