#include "repack/tool/source.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "repack/checkpoint/checkpoint_family.hpp"
#include "repack/checkpoint/checkpoint_import.hpp"
#include "repack/checkpoint/gguf.hpp"
#include "repack/checkpoint/safetensors.hpp"
#include "repack/checkpoint/tensor_assembly.hpp"
#include "repack/format/layout.hpp"
#include "repack/quant/dequant.hpp"

namespace memra::repack {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// tokenizer_config.json's "chat_template": a string, or a list of {name, template}
// (the "default" one is the chat template).
std::string template_from_tokenizer_config(const fs::path& p) {
  const auto j = nlohmann::json::parse(read_text(p), nullptr, false);
  if (!j.is_object() || !j.contains("chat_template")) return "";
  const auto& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())
    for (const auto& e : t)
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
        return e["template"].get<std::string>();
  return "";
}

}  // namespace

uint64_t element_count(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

bool Source::convertible(const std::string& scheme) {
  if (scheme == "f32" || scheme == "f16" || scheme == "bf16" || scheme == "f8_e4m3") return true;
  std::string upper = scheme;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  quant::GgmlType t;
  if (!quant::ggml_type_from_name(upper, &t)) return false;
  const quant::GgmlTypeInfo* info = quant::ggml_type_info(t);
  return info && info->exact_dequant;
}

namespace {

// `count` elements of a contiguous `scheme` run at `data`, from element `first` (whole blocks).
Status run_to_f32(const SourceTensor& t, const uint8_t* data, uint64_t first, uint64_t count, float* dst) {
  const auto in_bytes = first == 0 ? std::optional<uint64_t>(0) : format::tensor_bytes(t.scheme, 1, {first});
  const auto n = static_cast<int64_t>(count);
  if (t.scheme == "f32") {
    std::memcpy(dst, data + first * 4, count * 4);
  } else if (t.scheme == "f16") {
    quant::dequantize_f16(data + first * 2, dst, n);
  } else if (t.scheme == "bf16") {
    quant::dequantize_bf16(data + first * 2, dst, n);
  } else if (t.scheme == "f8_e4m3") {
    quant::dequantize_f8_e4m3(data + first, dst, n);
  } else {
    std::string upper = t.scheme;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    quant::GgmlType type;
    if (!in_bytes || !quant::ggml_type_from_name(upper, &type) || !quant::dequantize_row(type, data + *in_bytes, dst, n))
      return make_error(ErrorCode::unsupported, "tensor '" + t.source_name + "' is " + t.scheme +
                                                    ", which memra cannot convert exactly; repack it with --quant keep");
  }
  return {};
}

}  // namespace

Status Source::to_f32(const SourceTensor& t, uint64_t first, uint64_t count, float* dst) const {
  if (t.imported) {  // whole rows, through the scheme's plugin
    const uint64_t cols = t.shape.back();
    if (first % cols || count % cols || first + count > element_count(t.shape))
      return make_error(ErrorCode::internal, "bad element range for tensor '" + t.source_name + "'");
    return t.imported->rows_to_f32(static_cast<int64_t>(first / cols), static_cast<int64_t>(count / cols), dst);
  }
  const uint64_t block = format::scheme_block_elements(t.scheme);
  const uint64_t total = element_count(t.shape);
  if (block == 0 || first % block || count % block || first + count > total)
    return make_error(ErrorCode::internal, "bad element range for tensor '" + t.source_name + "'");
  if (t.segments.size() <= 1) return run_to_f32(t, t.data ? t.data : t.segments.at(0).data, first, count, dst);
  // Assembled: each segment holds whole rows; walk the ones the range covers.
  const uint64_t elems_per_byte_num = total, bytes_den = t.bytes;  // elements of a segment = bytes * total / t.bytes
  uint64_t seg_first = 0;
  for (const SourceTensor::Segment& seg : t.segments) {
    const uint64_t seg_elems = seg.bytes * elems_per_byte_num / bytes_den;
    const uint64_t lo = std::max(first, seg_first), hi = std::min(first + count, seg_first + seg_elems);
    if (lo < hi) MEMRA_TRY(run_to_f32(t, seg.data, lo - seg_first, hi - lo, dst + (lo - first)));
    seg_first += seg_elems;
    if (seg_first >= first + count) break;
  }
  return {};
}

Result<std::unique_ptr<Source>> Source::open(const fs::path& path_in, const plugins::PluginHost& plugins) {
  std::unique_ptr<Source> s(new Source());
  std::error_code ec;
  s->path_ = fs::absolute(path_in, ec).lexically_normal();
  if (fs::is_directory(s->path_, ec)) {
    if (fs::exists(s->path_ / "manifest.json"))
      return make_error(ErrorCode::unsupported, s->path_.string() + " is already a .memra repack; give the original checkpoint");
    s->format_ = "safetensors";
    auto ckpt = safetensors::Checkpoint::open(s->path_.string());
    if (!ckpt) return ckpt.error();
    auto shared = std::make_shared<safetensors::Checkpoint>(std::move(*ckpt));
    s->keep_ = shared;
    auto raw = raw_config_from_hf(s->path_.string(), *shared);
    if (!raw) return raw.error();
    auto family = normalize_checkpoint(*raw, plugins);
    if (!family) return family.error();
    s->config_ = family->config;
    for (const std::string& shard : shared->shard_paths()) s->weight_files_.push_back(fs::absolute(shard).lexically_normal());
    std::sort(s->weight_files_.begin(), s->weight_files_.end());
    // Weights stored already quantised (FP8 with scales, NVFP4, ...) as their quant plugin reads
    // them, their scale tensors with them (repack/checkpoint/checkpoint_import.hpp).
    auto tensors = safetensors_tensors(*shared, plugins);
    if (!tensors) return tensors.error();
    const std::vector<StoredTensor>& stored = tensors->stored;
    // The family's names, and the tensors it assembles from parts (stacked experts, ...).
    auto assembled = assemble_tensors(*family, stored, true);
    if (!assembled) return assembled.error();
    for (const AssembledTensor& a : *assembled) {
      const safetensors::TensorView& t = shared->tensors()[tensors->from.at(a.sources[0])];
      SourceTensor st;
      for (size_t k : a.sources)
        if (tensors->imported(k) && a.sources.size() > 1)
          return make_error(ErrorCode::unsupported, "tensor '" + a.name + "' is assembled from parts stored quantised (" +
                                                        t.name + "), which memra cannot assemble yet");
      st.imported = tensors->imported(a.sources[0]);
      st.source_name = t.name;
      st.name = a.name;  // a tensor the family does not read keeps its name
      st.shape = a.shape;
      st.scheme = a.scheme;
      for (const TensorSegment& seg : a.segments) st.segments.push_back({seg.data, seg.bytes});
      st.data = a.segments.size() == 1 ? a.segments[0].data : nullptr;
      st.bytes = a.bytes;
      st.file = fs::absolute(shared->shard_paths().at(t.shard)).lexically_normal();
      s->tensors_.push_back(std::move(st));
    }
    // Index file (sharded checkpoints), config, tokenizer and template files travel along.
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors.index.json"})
      if (fs::is_regular_file(s->path_ / f)) s->side_files_.push_back({s->path_ / f, std::string("source/") + f});
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
      if (fs::is_regular_file(s->path_ / f)) s->side_files_.push_back({s->path_ / f, f});
    if (fs::is_regular_file(s->path_ / "chat_template.jinja")) s->chat_template_ = read_text(s->path_ / "chat_template.jinja");
    else if (fs::is_regular_file(s->path_ / "tokenizer_config.json"))
      s->chat_template_ = template_from_tokenizer_config(s->path_ / "tokenizer_config.json");
  } else if (fs::is_regular_file(s->path_, ec)) {
    s->format_ = "gguf";
    // Blocks memra cannot dequantize can still be carried as stored (--quant keep).
    gguf::OpenOptions go;
    go.require_dequantizable = false;
    auto file = gguf::File::open(s->path_.string(), go);
    if (!file) return file.error();
    auto shared = std::make_shared<gguf::File>(std::move(*file));
    s->keep_ = shared;
    auto raw = raw_config_from_gguf(*shared);
    if (!raw) return raw.error();
    auto family = normalize_checkpoint(*raw, plugins);
    if (!family) return family.error();
    s->config_ = family->config;
    s->weight_files_.push_back(s->path_);
    std::vector<StoredTensor> stored;
    for (const gguf::Tensor& t : shared->tensors()) {
      const std::string scheme = format::scheme_of_ggml_type(t.info->type);
      if (scheme.empty())
        return make_error(ErrorCode::unsupported, "tensor '" + t.name() + "' of " + s->path_.string() + " has ggml type " +
                                                      std::to_string(t.info->type) + ", which memra does not know");
      stored.push_back({t.name(), t.info->shape(), scheme, static_cast<const uint8_t*>(t.data), t.info->nbytes});
    }
    // The family's names, and the tensors it assembles from parts (a fused expert tensor split, ...).
    auto assembled = assemble_tensors(*family, stored, true);
    if (!assembled) return assembled.error();
    for (const AssembledTensor& a : *assembled) {
      SourceTensor st;
      st.source_name = stored[a.sources[0]].name;
      st.name = a.name;  // a tensor the family does not read keeps its name
      st.shape = a.shape;
      st.scheme = a.scheme;
      for (const TensorSegment& seg : a.segments) st.segments.push_back({seg.data, seg.bytes});
      st.data = a.segments.size() == 1 ? a.segments[0].data : nullptr;
      st.bytes = a.bytes;
      st.file = s->path_;
      s->tensors_.push_back(std::move(st));
    }
    if (shared->find("tokenizer.ggml.tokens")) {
      auto tok = gguf::read_tokenizer(*shared);
      if (!tok) return make_error(tok.error().code, s->path_.string() + ": " + tok.error().message);
      s->chat_template_ = tok->chat_template;
      s->gguf_tokenizer_ = std::move(*tok);
    }
  } else {
    return make_error(ErrorCode::not_found, s->path_.string() + " does not exist; give a Hugging Face model directory or a .gguf file");
  }
  // Sizes the readers computed must agree with the layouts the writer uses.
  for (const SourceTensor& t : s->tensors_) {
    if (t.imported) continue;  // its plugin checked the form
    const auto b = format::tensor_bytes(t.scheme, 1, t.shape);
    if (!b || *b != t.bytes)
      return make_error(ErrorCode::corrupt, "tensor '" + t.source_name + "' of " + s->path_.string() + " holds " +
                                                std::to_string(t.bytes) + " bytes, which does not fit its " + t.scheme + " shape");
  }
  return s;
}

}  // namespace memra::repack
