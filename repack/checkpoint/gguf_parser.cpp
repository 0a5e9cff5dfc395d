#include "repack/checkpoint/gguf_parser.hpp"

#include <algorithm>
#include <cstring>

namespace memra::gguf {
namespace {

using quant::GgmlTypeInfo;

Error corrupt_at(uint64_t pos, const std::string& what) {
  return make_error(ErrorCode::corrupt, "GGUF: " + what + " (at byte " + std::to_string(pos) +
                                            "); the file is damaged or truncated — re-download or re-convert it");
}

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return n_ - pos_; }

  Result<uint64_t> u(size_t bytes, const char* what) {
    if (remaining() < bytes) return corrupt_at(pos_, std::string("file ends inside ") + what);
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p_[pos_ + i]) << (8 * i);
    pos_ += bytes;
    return v;
  }
  Result<std::string> string(const char* what, uint64_t max_len) {
    auto len = u(8, what);
    if (!len) return len.error();
    if (*len > max_len) return corrupt_at(pos_ - 8, std::string(what) + " length " + std::to_string(*len) + " exceeds " + std::to_string(max_len));
    if (*len > remaining())
      return corrupt_at(pos_ - 8, std::string(what) + " length " + std::to_string(*len) + " runs past the end of the file");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(*len));
    pos_ += *len;
    return s;
  }
  void copy_to(std::vector<uint8_t>& out, uint64_t bytes) {  // caller checked `bytes` <= remaining()
    out.assign(p_ + pos_, p_ + pos_ + bytes);
    pos_ += bytes;
  }

 private:
  const uint8_t* p_;
  uint64_t n_;
  uint64_t pos_ = 0;
};

bool valid_value_type(uint64_t t) { return t <= static_cast<uint32_t>(ValueType::f64); }

Result<Value> read_value(Reader& r, ValueType type, int depth);

Status read_array(Reader& r, Array& a, int depth) {
  const uint64_t at = r.pos();
  auto et = r.u(4, "array element type");
  if (!et) return et.error();
  if (!valid_value_type(*et)) return corrupt_at(at, "unknown array element type " + std::to_string(*et));
  a.elem_type = static_cast<ValueType>(*et);
  auto count = r.u(8, "array length");
  if (!count) return count.error();
  a.count = *count;
  // Refuse counts the remaining bytes cannot hold before allocating anything.
  const uint64_t min_elem = a.elem_type == ValueType::string  ? 8
                            : a.elem_type == ValueType::array ? 12
                                                              : scalar_size(a.elem_type);
  if (a.count > r.remaining() / min_elem)
    return corrupt_at(at, "array of " + std::to_string(a.count) + " " + value_type_name(a.elem_type) +
                              " elements cannot fit in the " + std::to_string(r.remaining()) + " bytes left");
  if (a.elem_type == ValueType::string) {
    a.strings.reserve(static_cast<size_t>(a.count));
    for (uint64_t i = 0; i < a.count; ++i) {
      auto s = r.string("array string", UINT64_MAX);
      if (!s) return s.error();
      a.strings.push_back(std::move(*s));
    }
  } else if (a.elem_type == ValueType::array) {
    if (depth + 1 > kMaxArrayNesting) return corrupt_at(at, "arrays nest deeper than " + std::to_string(kMaxArrayNesting));
    a.arrays.reserve(static_cast<size_t>(a.count));
    for (uint64_t i = 0; i < a.count; ++i) {
      auto v = read_value(r, ValueType::array, depth + 1);
      if (!v) return v.error();
      a.arrays.push_back(std::move(*v));
    }
  } else {
    const uint64_t bytes = a.count * min_elem;
    if (a.elem_type == ValueType::boolean) {
      // Booleans are one byte, 0 or 1; anything else is damage.
      const uint64_t start = r.pos();
      r.copy_to(a.raw, bytes);
      for (uint64_t i = 0; i < bytes; ++i)
        if (a.raw[i] > 1) return corrupt_at(start + i, "bool array element is " + std::to_string(a.raw[i]));
    } else {
      r.copy_to(a.raw, bytes);
    }
  }
  return {};
}

Result<Value> read_value(Reader& r, ValueType type, int depth) {
  Value v;
  v.type = type;
  const uint64_t at = r.pos();
  switch (type) {
    case ValueType::string: {
      auto s = r.string("string value", UINT64_MAX);
      if (!s) return s.error();
      v.str = std::move(*s);
      return v;
    }
    case ValueType::array: {
      MEMRA_TRY(read_array(r, v.array, depth));
      return v;
    }
    default: {
      auto bits = r.u(scalar_size(type), value_type_name(type));
      if (!bits) return bits.error();
      if (type == ValueType::boolean && *bits > 1) return corrupt_at(at, "bool value is " + std::to_string(*bits));
      v.bits = *bits;
      return v;
    }
  }
}

bool mul_ok(uint64_t a, uint64_t b, uint64_t limit, uint64_t* out) {
  if (a != 0 && b > limit / a) return false;
  *out = a * b;
  return true;
}

Status read_tensor_info(Reader& r, TensorInfo& t) {
  const uint64_t at = r.pos();
  auto name = r.string("tensor name", 65535);
  if (!name) return name.error();
  t.name = std::move(*name);
  auto n_dims = r.u(4, "tensor dimension count");
  if (!n_dims) return n_dims.error();
  if (*n_dims > kMaxDims)
    return corrupt_at(at, "tensor '" + t.name + "' has " + std::to_string(*n_dims) + " dimensions (at most 4)");
  uint64_t n = 1;
  for (uint64_t d = 0; d < *n_dims; ++d) {
    auto ne = r.u(8, "tensor dimension");
    if (!ne) return ne.error();
    if (*ne > static_cast<uint64_t>(INT64_MAX) || !mul_ok(n, *ne, INT64_MAX, &n))
      return corrupt_at(at, "tensor '" + t.name + "' element count overflows");
    t.ne.push_back(*ne);
  }
  t.n_elements = n;
  auto type = r.u(4, "tensor type");
  if (!type) return type.error();
  t.type = static_cast<uint32_t>(*type);
  auto off = r.u(8, "tensor offset");
  if (!off) return off.error();
  t.offset = *off;
  const GgmlTypeInfo* info = quant::ggml_type_info(t.type);
  if (info == nullptr)
    return make_error(ErrorCode::unsupported, "GGUF: tensor '" + t.name + "' has unknown ggml type id " +
                                                  std::to_string(t.type) +
                                                  "; this file needs a newer memra (or re-quantize it to a known type)");
  const uint64_t row = t.ne.empty() ? 1 : t.ne[0];
  if (row % info->block_size != 0)
    return corrupt_at(at, "tensor '" + t.name + "' row of " + std::to_string(row) + " elements is not a multiple of " +
                              info->name + "'s block size " + std::to_string(info->block_size));
  if (!mul_ok(n / info->block_size, info->type_size, INT64_MAX, &t.nbytes))
    return corrupt_at(at, "tensor '" + t.name + "' byte size overflows");
  return {};
}

}  // namespace

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::u8: return "UINT8";
    case ValueType::i8: return "INT8";
    case ValueType::u16: return "UINT16";
    case ValueType::i16: return "INT16";
    case ValueType::u32: return "UINT32";
    case ValueType::i32: return "INT32";
    case ValueType::f32: return "FLOAT32";
    case ValueType::boolean: return "BOOL";
    case ValueType::string: return "STRING";
    case ValueType::array: return "ARRAY";
    case ValueType::u64: return "UINT64";
    case ValueType::i64: return "INT64";
    case ValueType::f64: return "FLOAT64";
  }
  return "?";
}

size_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::u8: case ValueType::i8: case ValueType::boolean: return 1;
    case ValueType::u16: case ValueType::i16: return 2;
    case ValueType::u32: case ValueType::i32: case ValueType::f32: return 4;
    case ValueType::u64: case ValueType::i64: case ValueType::f64: return 8;
    default: return 0;
  }
}

const Value* Parsed::find(std::string_view key) const {
  const auto it = key_index.find(std::string(key));
  return it == key_index.end() ? nullptr : &metadata[it->second].second;
}

const TensorInfo* Parsed::find_tensor(std::string_view name) const {
  const auto it = tensor_index.find(std::string(name));
  return it == tensor_index.end() ? nullptr : &tensors[it->second];
}

Result<Parsed> parse(const uint8_t* file, size_t size) {
  Reader r(file, size);
  Parsed g;
  g.file_size = size;
  if (size < 4 || std::memcmp(file, "GGUF", 4) != 0)
    return make_error(ErrorCode::corrupt, "not a GGUF file (the first 4 bytes are not 'GGUF')");
  (void)r.u(4, "magic");
  auto version = r.u(4, "version");
  if (!version) return version.error();
  if (*version == 1)
    return make_error(ErrorCode::unsupported, "GGUF version 1 is not supported (v2 and v3 are); re-convert the model with a current llama.cpp");
  if (*version != 2 && *version != 3) {
    if ((*version & 0xffff) == 0)
      return make_error(ErrorCode::unsupported, "GGUF file looks big-endian (version field " + std::to_string(*version) + "); only little-endian GGUF is supported");
    return make_error(ErrorCode::unsupported, "GGUF version " + std::to_string(*version) + " is not supported (v2 and v3 are)");
  }
  g.version = static_cast<uint32_t>(*version);
  auto n_tensors = r.u(8, "tensor count");
  if (!n_tensors) return n_tensors.error();
  auto n_kv = r.u(8, "metadata count");
  if (!n_kv) return n_kv.error();
  // Smallest possible kv: 8-byte key length + 4-byte type + 1-byte value; tensor info:
  // 8-byte name length + 4-byte n_dims + 4-byte type + 8-byte offset.
  if (*n_kv > r.remaining() / 13)
    return corrupt_at(16, "metadata count " + std::to_string(*n_kv) + " cannot fit in the file");
  if (*n_tensors > r.remaining() / 24)
    return corrupt_at(8, "tensor count " + std::to_string(*n_tensors) + " cannot fit in the file");

  g.metadata.reserve(static_cast<size_t>(*n_kv));
  for (uint64_t i = 0; i < *n_kv; ++i) {
    const uint64_t at = r.pos();
    auto key = r.string("metadata key", kMaxKeyBytes);
    if (!key) return key.error();
    if (key->empty()) return corrupt_at(at, "empty metadata key");
    auto type = r.u(4, "metadata value type");
    if (!type) return type.error();
    if (!valid_value_type(*type)) return corrupt_at(at, "key '" + *key + "' has unknown value type " + std::to_string(*type));
    auto value = read_value(r, static_cast<ValueType>(*type), 0);
    if (!value) return value.error();
    if (!g.key_index.emplace(*key, g.metadata.size()).second) return corrupt_at(at, "duplicate metadata key '" + *key + "'");
    g.metadata.emplace_back(std::move(*key), std::move(*value));
  }

  if (const Value* a = g.find("general.alignment")) {
    if (a->type != ValueType::u32)
      return corrupt_at(0, std::string("general.alignment has type ") + value_type_name(a->type) + ", not UINT32");
    if (a->bits == 0 || (a->bits & (a->bits - 1)) != 0)
      return corrupt_at(0, "general.alignment " + std::to_string(a->bits) + " is not a power of two");
    g.alignment = a->bits;
  }

  g.tensors.reserve(static_cast<size_t>(*n_tensors));
  for (uint64_t i = 0; i < *n_tensors; ++i) {
    const uint64_t at = r.pos();
    TensorInfo t;
    MEMRA_TRY(read_tensor_info(r, t));
    if (!g.tensor_index.emplace(t.name, g.tensors.size()).second) return corrupt_at(at, "duplicate tensor name '" + t.name + "'");
    g.tensors.push_back(std::move(t));
  }

  const uint64_t pos = r.pos();
  g.data_offset = pos + (g.alignment - pos % g.alignment) % g.alignment;
  if (!g.tensors.empty() && g.data_offset > size)
    return corrupt_at(pos, "the tensor data section (at " + std::to_string(g.data_offset) + ") starts past the end of the file");
  const uint64_t data_size = g.data_offset <= size ? size - g.data_offset : 0;
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(g.tensors.size());
  for (const auto& t : g.tensors) {
    if (t.offset % g.alignment != 0)
      return corrupt_at(pos, "tensor '" + t.name + "' data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " + std::to_string(g.alignment));
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      return corrupt_at(pos, "tensor '" + t.name + "' data [" + std::to_string(t.offset) + ", +" + std::to_string(t.nbytes) + ") runs past the " + std::to_string(data_size) + "-byte data section");
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  uint64_t end = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : by_offset) {
    if (t->nbytes == 0) continue;
    if (prev != nullptr && t->offset < end)
      return corrupt_at(pos, "tensor '" + t->name + "' data overlaps tensor '" + prev->name + "'");
    end = t->offset + t->nbytes;
    prev = t;
  }
  return g;
}

// ---- value accessors -------------------------------------------------------

namespace {

std::optional<int64_t> int_from_bits(ValueType t, uint64_t bits) {
  switch (t) {
    case ValueType::u8: case ValueType::u16: case ValueType::u32: case ValueType::boolean:
      return static_cast<int64_t>(bits);
    case ValueType::u64:
      if (bits > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      return static_cast<int64_t>(bits);
    case ValueType::i8: return static_cast<int8_t>(bits);
    case ValueType::i16: return static_cast<int16_t>(bits);
    case ValueType::i32: return static_cast<int32_t>(bits);
    case ValueType::i64: return static_cast<int64_t>(bits);
    default: return std::nullopt;
  }
}

std::optional<double> float_from_bits(ValueType t, uint64_t bits) {
  if (t == ValueType::f32) {
    const auto b = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &b, 4);
    return static_cast<double>(f);
  }
  if (t == ValueType::f64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  return std::nullopt;
}

uint64_t raw_at(const Array& a, uint64_t i) {
  const size_t sz = scalar_size(a.elem_type);
  uint64_t v = 0;
  for (size_t k = 0; k < sz; ++k) v |= static_cast<uint64_t>(a.raw[i * sz + k]) << (8 * k);
  return v;
}

}  // namespace

bool Value::is_integer() const { return type != ValueType::boolean && int_from_bits(type, 0).has_value(); }

std::optional<int64_t> Value::as_int() const {
  if (type == ValueType::boolean) return std::nullopt;
  return int_from_bits(type, bits);
}

std::optional<uint64_t> Value::as_uint() const {
  if (type == ValueType::u64) return bits;
  const auto v = as_int();
  if (!v || *v < 0) return std::nullopt;
  return static_cast<uint64_t>(*v);
}

std::optional<double> Value::as_float() const { return float_from_bits(type, bits); }

std::optional<bool> Value::as_bool() const {
  if (type != ValueType::boolean) return std::nullopt;
  return bits != 0;
}

std::optional<int64_t> Array::int_at(uint64_t i) const {
  if (i >= count || scalar_size(elem_type) == 0 || elem_type == ValueType::f32 || elem_type == ValueType::f64) return std::nullopt;
  return int_from_bits(elem_type, raw_at(*this, i));
}

std::optional<uint64_t> Array::uint_at(uint64_t i) const {
  if (i < count && elem_type == ValueType::u64) return raw_at(*this, i);
  const auto v = int_at(i);
  if (!v || *v < 0) return std::nullopt;
  return static_cast<uint64_t>(*v);
}

std::optional<double> Array::float_at(uint64_t i) const {
  if (i >= count || (elem_type != ValueType::f32 && elem_type != ValueType::f64)) return std::nullopt;
  return float_from_bits(elem_type, raw_at(*this, i));
}

const std::string* Array::string_at(uint64_t i) const {
  return elem_type == ValueType::string && i < strings.size() ? &strings[i] : nullptr;
}

const Value* Array::array_at(uint64_t i) const {
  return elem_type == ValueType::array && i < arrays.size() ? &arrays[i] : nullptr;
}

}  // namespace memra::gguf
