#include "host/engine/model_source.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "repack/checkpoint/checkpoint_family.hpp"
#include "repack/checkpoint/checkpoint_import.hpp"
#include "repack/checkpoint/gguf.hpp"
#include "repack/checkpoint/safetensors.hpp"
#include "repack/checkpoint/tensor_assembly.hpp"
#include "repack/format/reader.hpp"
#include "repack/quant/dequant.hpp"

namespace memra::engine {
namespace {

namespace fs = std::filesystem;

const char* intern(ModelSource& s, std::string v) { return s.strings.emplace_back(std::move(v)).c_str(); }

memra_weight make_weight(ModelSource& s, const std::string& name, const std::string& scheme, memra_dtype dtype,
                         const std::vector<uint64_t>& shape, const void* data, uint64_t bytes) {
  memra_weight w{};
  w.struct_size = MEMRA_WEIGHT_STRUCT_SIZE;
  w.name = intern(s, name);
  w.quant = intern(s, scheme);
  w.dtype = dtype;
  w.ndim = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size() && i < 4; ++i) w.shape[i] = static_cast<int64_t>(shape[i]);
  w.data = data;
  w.bytes = bytes;
  return w;
}

Status add_f32_copy(ModelSource& s, const std::string& name, const std::vector<uint64_t>& shape, std::vector<float> v) {
  const auto& stored = s.f32.emplace_back(std::move(v));
  s.weights.push_back(make_weight(s, name, "f32", MEMRA_DTYPE_F32, shape, stored.data(), stored.size() * sizeof(float)));
  return {};
}

Result<std::unique_ptr<ModelSource>> open_safetensors(const std::string& path, const plugins::PluginHost& plugins) {
  auto src = std::make_unique<ModelSource>();
  src->path = path;
  src->format = "safetensors";
  auto ckpt = safetensors::Checkpoint::open(path);
  if (!ckpt) return ckpt.error();
  auto shared = std::make_shared<safetensors::Checkpoint>(std::move(*ckpt));
  src->mapping = shared;
  auto raw = raw_config_from_hf(path, *shared);
  if (!raw) return raw.error();
  auto family = normalize_checkpoint(*raw, plugins);
  if (!family) return family.error();
  src->config = family->config;
  // Weights stored already quantised (FP8 with scales, NVFP4, ...) as their quant plugin reads
  // them (repack/checkpoint/checkpoint_import.hpp), written into memory of their own below.
  auto stored = safetensors_tensors(*shared, plugins);
  if (!stored) return stored.error();
  auto tensors = assemble_tensors(*family, stored->stored, false);
  if (!tensors) return tensors.error();
  for (const AssembledTensor& a : *tensors) {
    const safetensors::TensorView& t = shared->tensors()[stored->from.at(a.sources[0])];
    if (const auto& im = stored->imported(a.sources[0])) {
      if (a.sources.size() > 1)
        return make_error(ErrorCode::unsupported, "tensor '" + a.name + "' is assembled from parts stored quantised (" + t.name +
                                                      "), which memra cannot assemble yet");
      auto b = im->bytes(im->rows());
      if (!b) return b.error();
      std::vector<uint8_t>& bytes = src->assembled.emplace_back(*b);
      MEMRA_TRY(im->write_rows(0, im->rows(), std::span<std::byte>(reinterpret_cast<std::byte*>(bytes.data()), bytes.size())));
      src->weights.push_back(make_weight(*src, a.name, a.scheme, MEMRA_DTYPE_BLOCKS, a.shape, bytes.data(), bytes.size()));
      continue;
    }
    if (a.shape.size() == 1) {
      auto v = safetensors::to_f32(t);
      if (!v) return v.error();
      MEMRA_TRY(add_f32_copy(*src, a.name, a.shape, std::move(*v)));
      continue;
    }
    memra_dtype dtype = MEMRA_DTYPE_INVALID;
    if (a.scheme == "bf16") dtype = MEMRA_DTYPE_BF16;
    else if (a.scheme == "f16") dtype = MEMRA_DTYPE_F16;
    else if (a.scheme == "f32") dtype = MEMRA_DTYPE_F32;
    else
      return make_error(ErrorCode::unsupported, "tensor '" + t.name + "' of " + path +
                                                    " has a dtype the engine cannot use directly; repack it with memra-repack");
    const void* data = a.segments[0].data;
    if (a.segments.size() > 1) {  // stacked or split by the family: rows copied together
      std::vector<uint8_t>& bytes = src->assembled.emplace_back();
      bytes.reserve(a.bytes);
      for (const TensorSegment& seg : a.segments) bytes.insert(bytes.end(), seg.data, seg.data + seg.bytes);
      data = bytes.data();
    }
    src->weights.push_back(make_weight(*src, a.name, a.scheme, dtype, a.shape, data, a.bytes));
  }
  return src;
}

Result<std::unique_ptr<ModelSource>> open_gguf(const std::string& path, const plugins::PluginHost& plugins) {
  auto src = std::make_unique<ModelSource>();
  src->path = path;
  src->format = "gguf";
  auto file = gguf::File::open(path);
  if (!file) return file.error();
  auto shared = std::make_shared<gguf::File>(std::move(*file));
  src->mapping = shared;
  auto raw = raw_config_from_gguf(*shared);
  if (!raw) return raw.error();
  auto family = normalize_checkpoint(*raw, plugins);
  if (!family) return family.error();
  src->config = family->config;
  // Canonical names, and the tensors the family assembles from parts (a fused expert tensor
  // split, ...); a tensor named as it stands stays where the file maps it.
  std::vector<StoredTensor> stored;
  for (const gguf::Tensor& t : shared->tensors()) {
    std::string scheme = quant::ggml_type_name(t.info->type);
    std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    stored.push_back({t.name(), t.info->shape(), scheme, static_cast<const uint8_t*>(t.data), t.info->nbytes});
  }
  auto tensors = assemble_tensors(*family, stored, false);
  if (!tensors) return tensors.error();
  for (const AssembledTensor& a : *tensors) {
    if (a.shape.size() == 1) {
      auto v = shared->dequantize(shared->tensors()[a.sources[0]]);
      if (!v) return v.error();
      MEMRA_TRY(add_f32_copy(*src, a.name, a.shape, std::move(*v)));
      continue;
    }
    memra_dtype dtype = MEMRA_DTYPE_BLOCKS;
    if (a.scheme == "f32") dtype = MEMRA_DTYPE_F32;
    else if (a.scheme == "f16") dtype = MEMRA_DTYPE_F16;
    else if (a.scheme == "bf16") dtype = MEMRA_DTYPE_BF16;
    const void* data = a.segments[0].data;
    if (a.segments.size() > 1) {  // assembled by the family: rows copied together
      std::vector<uint8_t>& bytes = src->assembled.emplace_back();
      bytes.reserve(a.bytes);
      for (const TensorSegment& seg : a.segments) bytes.insert(bytes.end(), seg.data, seg.data + seg.bytes);
      data = bytes.data();
    }
    src->weights.push_back(make_weight(*src, a.name, a.scheme, dtype, a.shape, data, a.bytes));
  }
  return src;
}

// The engine's element type for a .memra scheme; INVALID for types no op takes.
memra_dtype memra_scheme_dtype(const std::string& scheme) {
  if (scheme == "f32") return MEMRA_DTYPE_F32;
  if (scheme == "f16") return MEMRA_DTYPE_F16;
  if (scheme == "bf16") return MEMRA_DTYPE_BF16;
  if (scheme == "f8_e4m3") return MEMRA_DTYPE_F8_E4M3;
  if (scheme == "i8") return MEMRA_DTYPE_I8;
  if (scheme == "u8") return MEMRA_DTYPE_U8;
  if (scheme == "i32") return MEMRA_DTYPE_I32;
  if (scheme == "i64") return MEMRA_DTYPE_I64;
  if (scheme == "f64" || scheme == "bool" || scheme == "u16" || scheme == "i16" || scheme == "u32" || scheme == "u64" ||
      scheme == "f8_e5m2" || scheme == "f8_e8m0")
    return MEMRA_DTYPE_INVALID;
  return MEMRA_DTYPE_BLOCKS;  // ggml block layouts and memra fp8: owned by quant plugins
}

Result<std::unique_ptr<ModelSource>> open_memra(const std::string& path) {
  auto src = std::make_unique<ModelSource>();
  src->path = path;
  src->format = "memra";
  auto model = format::MemraModel::open(path);
  if (!model) return model.error();
  auto shared = std::make_shared<format::MemraModel>(std::move(*model));
  src->mapping = shared;
  src->config = shared->config();
  for (const format::Tensor& t : shared->tensors()) {
    const format::TensorEntry& e = *t.entry;
    const memra_dtype dtype = memra_scheme_dtype(e.scheme);
    if (dtype == MEMRA_DTYPE_INVALID) continue;  // buffers no op reads
    if (e.shape.size() == 1 && dtype != MEMRA_DTYPE_F32) {
      // memra-repack stores 1-D tensors as float32; convert any other float exactly.
      std::vector<float> v(e.shape[0]);
      std::string upper = e.scheme;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      quant::GgmlType type;
      if (!quant::ggml_type_from_name(upper, &type) || !quant::dequantize_row(type, t.data, v.data(), static_cast<int64_t>(v.size())))
        return make_error(ErrorCode::unsupported, "tensor '" + e.name + "' of " + path + " is a 1-D " + e.scheme +
                                                      " tensor the engine cannot read; repack it with memra-repack");
      MEMRA_TRY(add_f32_copy(*src, e.name, e.shape, std::move(v)));
      continue;
    }
    src->weights.push_back(make_weight(*src, e.name, e.scheme, dtype, e.shape, t.data, e.bytes));
  }
  return src;
}

}  // namespace

Result<std::unique_ptr<ModelSource>> open_model_source(const std::string& path, const plugins::PluginHost& plugins) {
  std::error_code ec;
  if (format::is_memra_dir(path)) {
    auto r = open_memra(path);
    if (r) (*r)->config_json = model_config_to_json((*r)->config);
    return r;
  }
  if (fs::is_directory(path, ec)) {
    if (!fs::exists(fs::path(path) / "config.json"))
      return make_error(ErrorCode::not_found, path + " has no config.json (nor manifest.json): give a Hugging Face model directory, a .memra directory or a .gguf file");
    auto r = open_safetensors(path, plugins);
    if (r) (*r)->config_json = model_config_to_json((*r)->config);
    return r;
  }
  if (fs::is_regular_file(path, ec)) {
    auto r = open_gguf(path, plugins);
    if (r) (*r)->config_json = model_config_to_json((*r)->config);
    return r;
  }
  return make_error(ErrorCode::not_found, "model path " + path + " does not exist");
}

}  // namespace memra::engine
