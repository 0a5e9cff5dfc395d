// quant-fp8's checkpoint importer (memra_quant_api.import_tensor, SDK 2.12): published FP8
// weights read as they are into memra's fp8 layout v1 (per row, cols/128 float32 scales
// then the e4m3fn codes), which holds each of these forms exactly (the codes byte for
// byte, every scale as published, widened exactly to float32):
//  - 128x128 block scales, `weight_scale_inv` [ceil(N/128)][K/128] (DeepSeek-V3,
//    Qwen3-FP8): the dequantised weight is q * weight_scale_inv of its block;
//  - per-channel or per-tensor scales, `weight_scale` [N], [N, 1], [1] or [] (the
//    compressed-tensors / ModelOpt FP8 forms), with an optional `input_scale` (the static
//    activation scale of W8A8 serving; memra multiplies by the weight only).
// K must be a multiple of 128 (the layout's group); scales must be finite; codes that are
// NaN (S.1111.111) are refused. Nothing else of the checkpoint is read.
#include <cstdio>
#include <cstring>
#include <string>

#include "import_helpers.hpp"
#include "quant_plugin_common.hpp"
#include "quantize.hpp"

namespace memra::quant_plugin {

namespace {
constexpr int64_t kGroup = quant::kFp8Group;  // the fp8 layout's group (quantize.hpp)

enum class Form { block, channel, tensor };

struct Fp8Form {
  const char* scheme = "fp8";
  Form form = Form::tensor;
  const memra_checkpoint_tensor* scale = nullptr;
  int64_t rows = 0, cols = 0;
  uint64_t used = 0, row_bytes = 0;
};

memra_status refuse(memra_plugin_ctx* ctx, const std::string& why) {
  return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, std::string(ctx->name) + ": " + why);
}

// The form of args' weight, or UNSUPPORTED (not an fp8 weight) / a refusal.
memra_status match(memra_plugin_ctx* ctx, const memra_import_args& a, Fp8Form* f) {
  const memra_checkpoint_tensor& w = *a.weight;
  if (!w.dtype || std::strcmp(w.dtype, "F8_E4M3") != 0) return MEMRA_ERR_UNSUPPORTED;
  size_t si = 0, ii = 0;
  const memra_checkpoint_tensor* inv = import::sibling(a, "weight_scale_inv", &si);
  const memra_checkpoint_tensor* per = inv ? nullptr : import::sibling(a, "weight_scale", &si);
  if (!inv && !per) return MEMRA_ERR_UNSUPPORTED;  // an unscaled F8 tensor: read as plain values
  const std::string who = import::describe(w);
  if (w.ndim != 2 || w.shape[0] <= 0 || w.shape[1] <= 0 || w.bytes != static_cast<uint64_t>(w.shape[0] * w.shape[1]))
    return refuse(ctx, who + ": an fp8 weight must be a 2-D matrix of one byte per element");
  f->rows = w.shape[0], f->cols = w.shape[1];
  f->row_bytes = static_cast<uint64_t>(f->cols / kGroup * 4 + f->cols);
  if (f->cols % kGroup != 0)
    return refuse(ctx, who + ": rows of " + std::to_string(f->cols) + " columns break memra's fp8 group of 128");
  const memra_checkpoint_tensor& s = inv ? *inv : *per;
  if (!import::float_dtype(s) || std::strcmp(s.dtype, "F8_E4M3") == 0)
    return refuse(ctx, import::describe(s) + ": the scale of " + w.name + " must be F32, BF16 or F16");
  if (inv) {
    const int64_t br = (f->rows + kGroup - 1) / kGroup, bc = f->cols / kGroup;
    if (s.ndim != 2 || s.shape[0] != br || s.shape[1] != bc)
      return refuse(ctx, import::describe(s) + ": 128x128 block scales of " + who + " must be [" + std::to_string(br) + ", " +
                             std::to_string(bc) + "]");
    f->form = Form::block;
  } else {
    const int64_t n = import::elements(s);
    const bool channel = n == f->rows && f->rows > 1 && (s.ndim == 1 || (s.ndim == 2 && s.shape[1] == 1));
    const bool tensor = n == 1 && s.ndim <= 2;
    if (!channel && !tensor)
      return refuse(ctx, import::describe(s) + ": the scale of " + who + " must be per tensor ([] or [1]) or per channel ([" +
                             std::to_string(f->rows) + "] or [" + std::to_string(f->rows) + ", 1])");
    f->form = channel ? Form::channel : Form::tensor;
  }
  std::string why;
  if (!import::all_finite(s, &why)) return refuse(ctx, why);
  f->scale = &s;
  f->used = uint64_t{1} << si;
  if (const memra_checkpoint_tensor* in = import::sibling(a, "input_scale", &ii)) {
    if (!import::float_dtype(*in) || import::elements(*in) != 1 || !import::all_finite(*in, &why))
      return refuse(ctx, import::describe(*in) + ": an input scale must be one finite float");
    f->used |= uint64_t{1} << ii;
  }
  return MEMRA_OK;
}

}  // namespace

memra_status fp8_import_tensor(memra_plugin_ctx* ctx, memra_import_args* a) {
  return import::run_import<Fp8Form>(
      ctx, a, [&](const memra_import_args& args, Fp8Form* f) { return match(ctx, args, f); },
      [&](const Fp8Form& f, uint8_t* out) {
        const int64_t groups = f.cols / kGroup;
        const auto* codes = static_cast<const uint8_t*>(a->weight->data);
        for (int64_t r = a->row0; r < a->row0 + a->row_count; ++r, out += f.row_bytes) {
          for (int64_t g = 0; g < groups; ++g) {
            const float s = f.form == Form::block     ? import::float_at(*f.scale, (r / kGroup) * groups + g)
                            : f.form == Form::channel ? import::float_at(*f.scale, r)
                                                      : import::float_at(*f.scale, 0);
            std::memcpy(out + 4 * g, &s, 4);
          }
          const uint8_t* q = codes + r * f.cols;
          for (int64_t c = 0; c < f.cols; ++c)
            if ((q[c] & 0x7f) == 0x7f)
              return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, std::string(ctx->name) + ": " + a->weight->name +
                                                                " holds a NaN code at row " + std::to_string(r) + ", column " +
                                                                std::to_string(c));
          std::memcpy(out + groups * 4, q, static_cast<size_t>(f.cols));
        }
        return MEMRA_OK;
      });
}

}  // namespace memra::quant_plugin
