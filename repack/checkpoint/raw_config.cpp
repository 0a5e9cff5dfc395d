#include "repack/checkpoint/raw_config.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "repack/checkpoint/gguf.hpp"
#include "repack/checkpoint/safetensors.hpp"

namespace memra {
namespace {

using nlohmann::json;

bool slurp(const std::filesystem::path& p, std::string* out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

Result<json> hf_document(const std::string& config_text, const std::string& generation_text, std::string* arch) {
  json config = json::parse(config_text, nullptr, false);
  if (config.is_discarded() || !config.is_object()) return make_error(ErrorCode::invalid_argument, "config.json: not a JSON object");
  const auto archs = config.find("architectures");
  if (archs == config.end() || !archs->is_array() || archs->empty() || !(*archs)[0].is_string())
    return make_error(ErrorCode::invalid_argument, "config.json: no 'architectures' list; memra needs it to pick the model family");
  *arch = (*archs)[0].get<std::string>();
  json generation = nullptr;
  if (!generation_text.empty()) {
    generation = json::parse(generation_text, nullptr, false);
    if (generation.is_discarded() || !generation.is_object())
      return make_error(ErrorCode::invalid_argument, "generation_config.json is not a JSON object");
  }
  return json{{"format", "hf"}, {"architecture", *arch}, {"config", std::move(config)}, {"generation_config", std::move(generation)},
              {"tensors", json::object()}};
}

json gguf_value(const gguf::Value& v);

json gguf_array(const gguf::Array& a) {
  if (a.count > kMaxRawArray) return json{{"length", a.count}, {"element_type", gguf::value_type_name(a.elem_type)}};
  json out = json::array();
  for (uint64_t i = 0; i < a.count; ++i) {
    if (a.elem_type == gguf::ValueType::string) out.push_back(*a.string_at(i));
    else if (a.elem_type == gguf::ValueType::array) out.push_back(gguf_value(*a.array_at(i)));
    else if (a.elem_type == gguf::ValueType::boolean) out.push_back(*a.int_at(i) != 0);
    else if (a.elem_type == gguf::ValueType::f32 || a.elem_type == gguf::ValueType::f64) out.push_back(*a.float_at(i));
    else if (auto s = a.int_at(i)) out.push_back(*s);
    else out.push_back(*a.uint_at(i));
  }
  return out;
}

json gguf_value(const gguf::Value& v) {
  if (const auto* s = v.as_string()) return *s;
  if (const auto* a = v.as_array()) return gguf_array(*a);
  if (v.type == gguf::ValueType::boolean) return *v.as_bool();
  if (v.is_float()) return *v.as_float();
  if (auto i = v.as_int()) return *i;
  if (auto u = v.as_uint()) return *u;
  return nullptr;
}

}  // namespace

Result<RawConfig> raw_config_from_hf_json(const std::string& config_text, const std::string& generation_text) {
  RawConfig r;
  r.format = "hf";
  auto doc = hf_document(config_text, generation_text, &r.architecture);
  if (!doc) return doc.error();
  r.json = doc->dump();
  return r;
}

Result<RawConfig> raw_config_from_hf(const std::string& dir, const safetensors::Checkpoint& ckpt) {
  namespace fs = std::filesystem;
  std::string config, generation;
  if (!slurp(fs::path(dir) / "config.json", &config))
    return make_error(ErrorCode::not_found, "no config.json in '" + dir + "'; a Hugging Face checkpoint directory needs one");
  slurp(fs::path(dir) / "generation_config.json", &generation);  // optional
  RawConfig r;
  r.format = "hf";
  auto doc = hf_document(config, generation, &r.architecture);
  if (!doc) return make_error(doc.error().code, "'" + dir + "': " + doc.error().message);
  json& tensors = (*doc)["tensors"];
  for (const safetensors::TensorView& t : ckpt.tensors())
    tensors[t.name] = {{"dtype", safetensors::dtype_name(t.dtype)}, {"shape", t.shape}};
  r.json = doc->dump();
  return r;
}

Result<RawConfig> raw_config_from_gguf(const gguf::File& f) {
  RawConfig r;
  r.format = "gguf";
  r.architecture = f.architecture();
  if (r.architecture.empty())
    return make_error(ErrorCode::invalid_argument, "GGUF config: 'general.architecture' is missing; is this a model GGUF?");
  json metadata = json::object();
  for (const auto& [key, value] : f.metadata()) metadata[key] = gguf_value(value);
  json tensors = json::object();
  for (const gguf::Tensor& t : f.tensors())
    tensors[t.name()] = {{"dtype", quant::ggml_type_name(t.info->type)}, {"shape", t.info->shape()}};
  r.json = json{{"format", "gguf"}, {"architecture", r.architecture}, {"metadata", std::move(metadata)}, {"tensors", std::move(tensors)}}.dump();
  return r;
}

}  // namespace memra
