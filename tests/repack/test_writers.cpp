#include "tests/repack/test_writers.hpp"

#include <cstring>
#include <nlohmann/json.hpp>

namespace memra::testing {

void GgufWriter::kv_f32(const std::string& k, float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  key(k, 6);
  put(b, 4);
  ++n_kv_;
}

void GgufWriter::kv_f64(const std::string& k, double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  key(k, 12);
  put(b, 8);
  ++n_kv_;
}

void GgufWriter::kv_str_array(const std::string& k, const std::vector<std::string>& v) {
  key(k, 9);
  put(8, 4);
  put(v.size(), 8);
  for (const auto& s : v) str(s);
  ++n_kv_;
}

void GgufWriter::kv_i32_array(const std::string& k, const std::vector<int32_t>& v) {
  key(k, 9);
  put(5, 4);
  put(v.size(), 8);
  for (int32_t x : v) put(static_cast<uint32_t>(x), 4);
  ++n_kv_;
}

void GgufWriter::kv_f32_array(const std::string& k, const std::vector<float>& v) {
  key(k, 9);
  put(6, 4);
  put(v.size(), 8);
  for (float x : v) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    put(b, 4);
  }
  ++n_kv_;
}

void GgufWriter::kv_nested_i32(const std::string& k, const std::vector<std::vector<int32_t>>& v) {
  key(k, 9);
  put(9, 4);
  put(v.size(), 8);
  for (const auto& inner : v) {
    put(5, 4);
    put(inner.size(), 8);
    for (int32_t x : inner) put(static_cast<uint32_t>(x), 4);
  }
  ++n_kv_;
}

void GgufWriter::tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, std::vector<uint8_t> data) {
  tensors_.push_back({name, std::move(ne), type, std::move(data)});
}

std::vector<uint8_t> GgufWriter::finish(uint64_t alignment) const {
  std::vector<uint8_t> out;
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  const char magic[4] = {'G', 'G', 'U', 'F'};
  out.assign(magic, magic + 4);
  put(version_, 4);
  put(tensors_.size(), 8);
  put(n_kv_, 8);
  out.insert(out.end(), kv_.begin(), kv_.end());
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const auto& t : tensors_) {
    offsets.push_back(offset);
    offset += t.data.size();
    offset = (offset + alignment - 1) / alignment * alignment;
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    put(t.name.size(), 8);
    out.insert(out.end(), t.name.begin(), t.name.end());
    put(t.ne.size(), 4);
    for (uint64_t d : t.ne) put(d, 8);
    put(t.type, 4);
    put(offsets[i], 8);
  }
  while (out.size() % alignment != 0) out.push_back(0);
  const size_t base = out.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.resize(base + offsets[i], 0);
    out.insert(out.end(), tensors_[i].data.begin(), tensors_[i].data.end());
  }
  return out;
}

std::vector<uint8_t> write_safetensors(const std::vector<StTensor>& tensors,
                                       const std::vector<std::pair<std::string, std::string>>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = m;
  }
  uint64_t off = 0;
  for (const auto& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.data.size()}}};
    off += t.data.size();
  }
  std::string text = h.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');  // pad like the reference writer
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  for (const auto& t : tensors) out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

}  // namespace memra::testing
