#include "repack/checkpoint/safetensors_header.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace memra::safetensors {
namespace {

struct DtypeRow {
  Dtype dtype;
  const char* name;
  size_t size;
};

constexpr DtypeRow kDtypes[] = {
    {Dtype::BOOL, "BOOL", 1},       {Dtype::U8, "U8", 1},           {Dtype::I8, "I8", 1},
    {Dtype::F8_E4M3, "F8_E4M3", 1}, {Dtype::F8_E5M2, "F8_E5M2", 1}, {Dtype::F8_E8M0, "F8_E8M0", 1},
    {Dtype::U16, "U16", 2},         {Dtype::I16, "I16", 2},         {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2},       {Dtype::U32, "U32", 4},         {Dtype::I32, "I32", 4},
    {Dtype::F32, "F32", 4},         {Dtype::U64, "U64", 8},         {Dtype::I64, "I64", 8},
    {Dtype::F64, "F64", 8},
};

Error corrupt(const std::string& what) {
  return make_error(ErrorCode::corrupt, "safetensors header: " + what +
                                            "; the file is damaged or not a safetensors file — "
                                            "re-download or re-export it");
}

// The JSON of a safetensors header nests three levels at most. Refusing deeper
// input before parsing keeps hostile headers from costing stack or memory.
bool nesting_within(const uint8_t* p, size_t n, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t c = p[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > limit) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > UINT64_MAX / a) return true;
  *out = a * b;
  return false;
}

Result<uint64_t> json_u64(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number_integer()) return corrupt(what + " is not a non-negative integer");
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  const int64_t s = v.get<int64_t>();
  if (s < 0) return corrupt(what + " is negative");
  return static_cast<uint64_t>(s);
}

Result<TensorEntry> parse_entry(const std::string& name, const nlohmann::json& v, uint64_t data_offset,
                                uint64_t data_size) {
  const std::string where = "tensor '" + name + "'";
  if (!v.is_object()) return corrupt(where + " is not an object");
  const auto dt = v.find("dtype");
  const auto sh = v.find("shape");
  const auto off = v.find("data_offsets");
  if (dt == v.end() || sh == v.end() || off == v.end())
    return corrupt(where + " lacks one of dtype, shape, data_offsets");
  if (v.size() != 3) return corrupt(where + " has keys besides dtype, shape, data_offsets");
  if (!dt->is_string()) return corrupt(where + " dtype is not a string");
  TensorEntry e;
  e.name = name;
  const std::string dtype = dt->get<std::string>();
  if (!dtype_from_name(dtype, &e.dtype))
    return make_error(ErrorCode::unsupported, "safetensors: " + where + " has dtype '" + dtype +
                                                  "', which memra does not know; known: " +
                                                  dtype_supported_list());
  if (!sh->is_array()) return corrupt(where + " shape is not an array");
  if (sh->size() > 8) return corrupt(where + " has " + std::to_string(sh->size()) + " dimensions (at most 8)");
  uint64_t count = 1;
  for (const auto& d : *sh) {
    auto dim = json_u64(d, where + " shape entry");
    if (!dim) return dim.error();
    e.shape.push_back(*dim);
    if (mul_overflows(count, *dim, &count)) return corrupt(where + " element count overflows");
  }
  e.n_elements = count;
  uint64_t bytes = 0;
  if (mul_overflows(count, dtype_size(e.dtype), &bytes)) return corrupt(where + " byte size overflows");
  if (!off->is_array() || off->size() != 2) return corrupt(where + " data_offsets is not [begin, end]");
  auto b = json_u64((*off)[0], where + " data_offsets[0]");
  if (!b) return b.error();
  auto en = json_u64((*off)[1], where + " data_offsets[1]");
  if (!en) return en.error();
  if (*b > *en) return corrupt(where + " data_offsets begin > end");
  if (*en > data_size)
    return corrupt(where + " data ends at " + std::to_string(*en) + ", past the data section (" +
                   std::to_string(data_size) + " bytes; truncated file?)");
  if (*en - *b != bytes)
    return corrupt(where + " covers " + std::to_string(*en - *b) + " bytes but shape x dtype needs " +
                   std::to_string(bytes));
  e.begin = data_offset + *b;
  e.end = data_offset + *en;
  return e;
}

}  // namespace

const char* dtype_name(Dtype d) {
  for (const auto& r : kDtypes)
    if (r.dtype == d) return r.name;
  return "?";
}

size_t dtype_size(Dtype d) {
  for (const auto& r : kDtypes)
    if (r.dtype == d) return r.size;
  return 0;
}

bool dtype_from_name(std::string_view name, Dtype* out) {
  for (const auto& r : kDtypes) {
    if (name == r.name) {
      *out = r.dtype;
      return true;
    }
  }
  return false;
}

std::string dtype_supported_list() {
  std::string s;
  for (const auto& r : kDtypes) {
    if (!s.empty()) s += ", ";
    s += r.name;
  }
  return s;
}

Result<Header> parse_header(const uint8_t* file, size_t size) {
  if (size < 8) return corrupt("file is " + std::to_string(size) + " bytes, shorter than the 8-byte length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[i];
  if (n < 2) return corrupt("header length " + std::to_string(n) + " is too small for a JSON object");
  if (n > kMaxHeaderBytes) return corrupt("header length " + std::to_string(n) + " exceeds the 100 MB limit");
  if (n > size - 8)
    return corrupt("header length " + std::to_string(n) + " runs past the end of the " + std::to_string(size) +
                   "-byte file");
  const uint8_t* json_begin = file + 8;
  if (json_begin[0] != '{') return corrupt("header does not start with '{'");
  if (!nesting_within(json_begin, n, 4)) return corrupt("header JSON nests deeper than a safetensors header can");
  // nlohmann validates UTF-8 inside strings and rejects stray bytes elsewhere.
  nlohmann::json root = nlohmann::json::parse(json_begin, json_begin + n, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return corrupt("header is not well-formed UTF-8 JSON");
  if (!root.is_object()) return corrupt("header is not a JSON object");

  Header h;
  h.header_size = n;
  h.data_offset = 8 + n;
  const uint64_t data_size = size - h.data_offset;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return corrupt("__metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) return corrupt("__metadata__ value '" + mk + "' is not a string");
        h.metadata.emplace_back(mk, mv.get<std::string>());
      }
      continue;
    }
    auto entry = parse_entry(key, value, h.data_offset, data_size);
    if (!entry) return entry.error();
    h.tensors.push_back(std::move(*entry));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.name < b.name;
  });
  // Non-empty ranges must not overlap (empty tensors take no bytes).
  uint64_t covered_to = h.data_offset;
  const TensorEntry* last = nullptr;
  for (const auto& t : h.tensors) {
    if (t.begin == t.end) continue;
    if (t.begin < covered_to)
      return corrupt("tensor '" + t.name + "' overlaps tensor '" + (last ? last->name : std::string("?")) + "'");
    covered_to = t.end;
    last = &t;
  }
  return h;
}

}  // namespace memra::safetensors
