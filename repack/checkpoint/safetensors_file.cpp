#include "repack/checkpoint/safetensors.hpp"
#include "repack/quant/dequant.hpp"

namespace memra::safetensors {

Result<File> File::open(const std::string& path) {
  auto map = MappedFile::open(path);
  if (!map) return map.error();
  auto header = parse_header((*map)->data(), (*map)->size());
  if (!header) return make_error(header.error().code, "'" + path + "': " + header.error().message);
  File f;
  f.map_ = std::move(*map);
  f.header_ = std::move(*header);
  f.views_.reserve(f.header_.tensors.size());
  for (const auto& e : f.header_.tensors) {
    TensorView v;
    v.name = e.name;
    v.dtype = e.dtype;
    v.shape = e.shape;
    v.n_elements = e.n_elements;
    v.data = f.map_->data() + e.begin;
    v.nbytes = e.end - e.begin;
    v.file_offset = e.begin;
    f.by_name_.emplace(v.name, f.views_.size());
    f.views_.push_back(std::move(v));
  }
  return f;
}

const TensorView* File::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &views_[it->second];
}

const TensorView* Checkpoint::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &views_[it->second];
}

Status to_f32(const TensorView& t, float* dst, uint64_t n) {
  if (n != t.n_elements)
    return make_error(ErrorCode::invalid_argument, "to_f32: tensor '" + t.name + "' has " +
                                                       std::to_string(t.n_elements) + " elements, buffer " +
                                                       std::to_string(n));
  const auto count = static_cast<int64_t>(n);
  switch (t.dtype) {
    case Dtype::F32: quant::dequantize_f32(t.data, dst, count); return {};
    case Dtype::F16: quant::dequantize_f16(t.data, dst, count); return {};
    case Dtype::BF16: quant::dequantize_bf16(t.data, dst, count); return {};
    case Dtype::F8_E4M3: quant::dequantize_f8_e4m3(t.data, dst, count); return {};
    default:
      return make_error(ErrorCode::unsupported, "tensor '" + t.name + "' has dtype " + dtype_name(t.dtype) +
                                                    ", which has no exact float32 conversion; convertible: "
                                                    "F32, F16, BF16, F8_E4M3");
  }
}

Result<std::vector<float>> to_f32(const TensorView& t) {
  if (t.dtype != Dtype::F32 && t.dtype != Dtype::F16 && t.dtype != Dtype::BF16 && t.dtype != Dtype::F8_E4M3)
    return to_f32(t, nullptr, t.n_elements).error();  // same message, nothing allocated
  std::vector<float> out(t.n_elements);
  auto st = to_f32(t, out.data(), out.size());
  if (!st) return st.error();
  return out;
}

}  // namespace memra::safetensors
