#include "repack/checkpoint/gguf.hpp"
#include "repack/quant/dequant.hpp"

namespace memra::gguf {

Result<File> File::open(const std::string& path, OpenOptions options) {
  auto map = MappedFile::open(path);
  if (!map) return map.error();
  auto parsed = parse((*map)->data(), (*map)->size());
  if (!parsed) return make_error(parsed.error().code, "'" + path + "': " + parsed.error().message);
  File f;
  f.map_ = std::move(*map);
  f.parsed_ = std::make_shared<const Parsed>(std::move(*parsed));
  f.tensors_.reserve(f.parsed_->tensors.size());
  for (const auto& info : f.parsed_->tensors) {
    Tensor t;
    t.info = &info;
    t.file_offset = f.parsed_->data_offset + info.offset;
    t.data = f.map_->data() + t.file_offset;
    f.tensors_.push_back(t);
  }
  if (options.require_dequantizable) {
    auto st = f.check_dequantizable();
    if (!st) return make_error(st.error().code, "'" + path + "': " + st.error().message);
  }
  return f;
}

Status File::check_dequantizable() const {
  std::string bad;
  size_t n = 0;
  for (const auto& t : tensors_) {
    const auto* info = quant::ggml_type_info(t.info->type);
    if (info != nullptr && info->exact_dequant) continue;
    if (++n <= 5) bad += (bad.empty() ? "" : ", ") + std::string("'") + t.name() + "' (" + quant::ggml_type_name(t.info->type) + ")";
  }
  if (n == 0) return {};
  if (n > 5) bad += " and " + std::to_string(n - 5) + " more";
  return make_error(ErrorCode::unsupported, "tensor type without an exact dequantizer: " + bad +
                                                "; supported types: " + quant::ggml_dequant_supported_list() +
                                                " — re-quantize the model to one of them");
}

const Tensor* File::find_tensor(std::string_view name) const {
  const TensorInfo* info = parsed_->find_tensor(name);
  if (info == nullptr) return nullptr;
  return &tensors_[static_cast<size_t>(info - parsed_->tensors.data())];
}

std::string File::architecture() const {
  const Value* v = find("general.architecture");
  return v && v->as_string() ? *v->as_string() : std::string();
}

namespace {
Error missing(std::string_view key) {
  return make_error(ErrorCode::not_found, "GGUF metadata key '" + std::string(key) + "' is missing");
}
Error wrong_type(std::string_view key, const Value& v, const char* want) {
  return make_error(ErrorCode::corrupt, "GGUF metadata key '" + std::string(key) + "' has type " +
                                            value_type_name(v.type) + ", expected " + want);
}
}  // namespace

Result<std::string> File::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  if (!v->as_string()) return wrong_type(key, *v, "STRING");
  return *v->as_string();
}

Result<int64_t> File::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  const auto i = v->as_int();
  if (!i) return wrong_type(key, *v, "an integer");
  return *i;
}

Result<double> File::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  if (const auto f = v->as_float()) return *f;
  if (const auto i = v->as_int()) return static_cast<double>(*i);
  return wrong_type(key, *v, "a number");
}

Result<bool> File::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return missing(key);
  const auto b = v->as_bool();
  if (!b) return wrong_type(key, *v, "BOOL");
  return *b;
}

Status File::dequantize(const Tensor& t, float* dst, uint64_t n) const {
  if (n != t.info->n_elements)
    return make_error(ErrorCode::invalid_argument, "dequantize: tensor '" + t.name() + "' has " +
                                                       std::to_string(t.info->n_elements) + " elements, buffer " + std::to_string(n));
  const auto* info = quant::ggml_type_info(t.info->type);
  if (info == nullptr || !info->exact_dequant)
    return make_error(ErrorCode::unsupported, "tensor '" + t.name() + "' has type " + quant::ggml_type_name(t.info->type) +
                                                  ", which memra cannot dequantize exactly; supported: " +
                                                  quant::ggml_dequant_supported_list());
  if (!quant::dequantize_row(t.type(), t.data, dst, static_cast<int64_t>(n)))
    return make_error(ErrorCode::internal, "dequantize: tensor '" + t.name() + "' was refused by the dequantizer");
  return {};
}

Result<std::vector<float>> File::dequantize(const Tensor& t) const {
  const auto* info = quant::ggml_type_info(t.info->type);
  if (info == nullptr || !info->exact_dequant) return dequantize(t, nullptr, t.info->n_elements).error();
  std::vector<float> out(t.info->n_elements);
  MEMRA_TRY(dequantize(t, out.data(), out.size()));
  return out;
}

}  // namespace memra::gguf
