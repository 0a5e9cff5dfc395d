#include "host/tools/memra-bench/random_model.hpp"

#include "repack/checkpoint/checkpoint_family.hpp"

#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "repack/checkpoint/checkpoint_family.hpp"
#include "repack/checkpoint/model_config.hpp"
#include "repack/quant/fp_convert.hpp"

namespace memra::bench {
namespace {

struct Layout {
  const char* scheme;
  int block_elems, block_bytes;
  std::vector<int> f16_fields;  // byte offsets of f16 scales in a block
  memra_dtype dtype;
};
const Layout* layout(const std::string& s) {
  static const Layout l[] = {
      {"f32", 1, 4, {}, MEMRA_DTYPE_F32},          {"f16", 1, 2, {}, MEMRA_DTYPE_F16},
      {"bf16", 1, 2, {}, MEMRA_DTYPE_BF16},        {"q8_0", 32, 34, {0}, MEMRA_DTYPE_BLOCKS},
      {"q4_0", 32, 18, {0}, MEMRA_DTYPE_BLOCKS},   {"q4_k", 256, 144, {0, 2}, MEMRA_DTYPE_BLOCKS},
      {"q5_k", 256, 176, {0, 2}, MEMRA_DTYPE_BLOCKS}, {"q6_k", 256, 210, {208}, MEMRA_DTYPE_BLOCKS},
      {"iq4_xs", 256, 136, {0}, MEMRA_DTYPE_BLOCKS}, {"fp8", 128, 132, {}, MEMRA_DTYPE_BLOCKS},
  };
  for (const Layout& x : l)
    if (s == x.scheme) return &x;
  return nullptr;
}

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Random values of magnitude ~2^-7..2^-5 (like trained weights), any sign.
float small_value(uint64_t r) {
  const uint32_t sign = static_cast<uint32_t>(r & 1) << 31;
  const uint32_t exp = 120 + static_cast<uint32_t>((r >> 1) % 3);
  const uint32_t man = static_cast<uint32_t>(r >> 8) & 0x7fffffu;
  return quant::bits_to_f32(sign | (exp << 23) | man);
}

// Fills rows [r0, r1) of a matrix in layout l.
void fill(const Layout& l, uint8_t* dst, int64_t cols, int64_t r0, int64_t r1, uint64_t seed) {
  uint64_t s = seed;
  const int64_t row_bytes = cols / l.block_elems * l.block_bytes;
  uint8_t* p = dst + r0 * row_bytes;
  const int64_t bytes = (r1 - r0) * row_bytes;
  if (l.block_elems == 1 && std::strcmp(l.scheme, "bf16") == 0) {
    // Four bf16 values per random word: sign, exponent 120..123, 7 mantissa bits.
    const int64_t n = bytes / 2;
    for (int64_t i = 0; i < n; i += 4) {
      const uint64_t r = splitmix(s);
      for (int64_t k = 0; k < 4 && i + k < n; ++k) {
        const uint32_t b = static_cast<uint32_t>(r >> (16 * k));
        const uint16_t h = static_cast<uint16_t>((b & 0x8000u) | ((120u + ((b >> 7) & 3u)) << 7) | (b & 0x7fu));
        std::memcpy(p + (i + k) * 2, &h, 2);
      }
    }
    return;
  }
  if (l.block_elems == 1) {
    const int64_t n = bytes / l.block_bytes;
    for (int64_t i = 0; i < n; ++i) {
      const float v = small_value(splitmix(s));
      if (l.block_bytes == 4) std::memcpy(p + i * 4, &v, 4);
      else {
        const uint16_t h = std::strcmp(l.scheme, "f16") == 0 ? quant::f32_to_fp16(v) : quant::f32_to_bf16(v);
        std::memcpy(p + i * 2, &h, 2);
      }
    }
    return;
  }
  if (std::strcmp(l.scheme, "fp8") == 0) {
    // memra fp8 rows: cols/128 f32 scales, then e4m3fn codes (random, no NaN codes).
    const int64_t groups = cols / 128;
    for (int64_t r = 0; r < r1 - r0; ++r) {
      uint8_t* row = p + r * row_bytes;
      for (int64_t g = 0; g < groups; ++g) {
        const float scale = (0.01f + static_cast<float>(splitmix(s) % 1000) * 1e-5f) / 448.0f;
        std::memcpy(row + g * 4, &scale, 4);
      }
      for (int64_t c = 0; c < cols; c += 8) {
        uint64_t v = splitmix(s);
        for (int k = 0; k < 8; ++k) {
          uint8_t q = static_cast<uint8_t>(v >> (8 * k));
          if ((q & 0x7fu) == 0x7fu) q = static_cast<uint8_t>(q - 1);
          row[groups * 4 + c + k] = q;
        }
      }
    }
    return;
  }
  for (int64_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t r = splitmix(s);
    std::memcpy(p + i, &r, 8);
  }
  for (int64_t i = bytes / 8 * 8; i < bytes; ++i) p[i] = static_cast<uint8_t>(splitmix(s));
  const int64_t blocks = bytes / l.block_bytes;
  for (int64_t b = 0; b < blocks; ++b)
    for (int off : l.f16_fields) {
      const uint16_t h = quant::f32_to_fp16(0.002f + static_cast<float>(splitmix(s) % 1000) * 1e-6f);
      std::memcpy(p + b * l.block_bytes + off, &h, 2);
    }
}

// A matrix in a quant plugin's own scheme (one the table above does not know): random
// values like fill's, quantised by the scheme's plugin, rows split over threads.
Status fill_by_plugin(const plugins::QuantPlugin& q, const std::string& scheme, std::vector<uint8_t>& buf, int64_t rows,
                      int64_t cols, uint64_t seed, unsigned threads) {
  auto row_bytes = q.weight_bytes(scheme, 1, cols);
  if (!row_bytes) return row_bytes.error();
  buf.assign(static_cast<size_t>(rows) * *row_bytes, 0);
  std::vector<std::thread> pool;
  std::vector<std::optional<Error>> errors(threads);
  for (unsigned k = 0; k < threads; ++k) {
    const int64_t r0 = rows * k / threads, r1 = rows * (k + 1) / threads;
    pool.emplace_back([&, k, r0, r1] {
      uint64_t s = seed + k;
      constexpr int64_t kChunk = 64;
      std::vector<float> x;
      for (int64_t r = r0; r < r1; r += kChunk) {
        const int64_t n = std::min(kChunk, r1 - r);
        x.resize(static_cast<size_t>(n * cols));
        for (float& v : x) v = small_value(splitmix(s));
        auto dst = std::span<std::byte>(reinterpret_cast<std::byte*>(buf.data() + r * *row_bytes), static_cast<size_t>(n) * *row_bytes);
        if (auto st = q.quantize(scheme, x, n, cols, dst); !st) {
          errors[k] = st.error();
          return;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) return *e;
  return {};
}

}  // namespace

Result<std::unique_ptr<engine::ModelSource>> random_model(const std::string& hf_config_json, const std::string& scheme,
                                                          const plugins::PluginHost& plugins, uint64_t seed) {
  // Built-in layouts are filled with random codes directly; any other scheme a quant plugin
  // serves (nvfp4, a third party's) gets random values quantised by its plugin, with the
  // embedding-side matrices its mix keeps as stored (memra_scheme_info.keep_as_stored) in bf16.
  std::optional<plugins::QuantPlugin> by_plugin;
  int32_t keep_as_stored = 0;
  if (!layout(scheme)) {
    auto q = plugins.quant_for(scheme, plugins.device_info());
    if (!q)
      return make_error(ErrorCode::invalid_argument, "unknown weight scheme '" + scheme + "': no installed quant plugin serves it "
                                                     "(bf16, f16, f32, q8_0, q4_0, q4_k, q5_k, q6_k, iq4_xs, fp8 and the plugins' schemes)");
    const memra_quant_api& api = q->api();
    if (MEMRA_STRUCT_HAS(&api, memra_quant_api, scheme_info) && api.scheme_info) {
      memra_scheme_info si{};
      si.struct_size = MEMRA_SCHEME_INFO_STRUCT_SIZE;
      if (api.scheme_info(q->ctx(), scheme.c_str(), &si) == MEMRA_OK) keep_as_stored = si.keep_as_stored;
    }
    by_plugin = std::move(*q);
  }
  auto raw = raw_config_from_hf_json(hf_config_json);
  if (!raw) return raw.error();
  auto normalised = normalize_checkpoint(*raw, plugins);
  if (!normalised) return normalised.error();
  const ModelConfig* config = &normalised->config;
  auto src = std::make_unique<engine::ModelSource>();
  src->path = "random:" + config->architecture + ":" + scheme;
  src->format = "random";
  src->config = *config;
  src->config_json = model_config_to_json(*config);
  auto plan = normalised->plugin.plan_create(src->config_json);
  if (!plan) return plan.error();
  auto desc = plan->describe();
  if (!desc) return desc.error();
  const auto tensors = nlohmann::json::parse(*desc)["tensors"];

  auto storage = std::make_shared<std::vector<std::vector<uint8_t>>>();
  storage->reserve(tensors.size());
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (const auto& t : tensors) {
    const std::string name = t["name"].get<std::string>();
    const std::vector<int64_t> shape = t["shape"].get<std::vector<int64_t>>();
    const bool matrix = t["matrix"].get<bool>();
    // A matrix's rows: a stacked [n][rows][cols] tensor (moe_ffn's experts) is n * rows rows.
    int64_t mat_rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) mat_rows *= shape[i];
    const int64_t mat_cols = shape.empty() ? 0 : shape.back();
    memra_weight w{};
    w.struct_size = MEMRA_WEIGHT_STRUCT_SIZE;
    w.name = src->strings.emplace_back(name).c_str();
    w.ndim = static_cast<int32_t>(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) w.shape[i] = shape[i];
    if (!matrix) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      const auto& v = src->f32.emplace_back(static_cast<size_t>(n), 1.0f);
      w.quant = src->strings.emplace_back("f32").c_str();
      w.dtype = MEMRA_DTYPE_F32;
      w.bytes = v.size() * 4;
      w.data = v.data();
    } else if (by_plugin && !((name == "token_embd.weight" && (keep_as_stored & MEMRA_KEEP_TOKEN_EMBD)) ||
                              (name == "output.weight" && (keep_as_stored & MEMRA_KEEP_HEAD)))) {
      auto& buf = storage->emplace_back();
      MEMRA_TRY(fill_by_plugin(*by_plugin, scheme, buf, mat_rows, mat_cols, seed * 1000003 + storage->size() * 131, threads));
      w.quant = src->strings.emplace_back(scheme).c_str();
      w.dtype = MEMRA_DTYPE_BLOCKS;
      w.bytes = buf.size();
      w.data = buf.data();
    } else {
      // fp8 checkpoints keep the input embedding table in 16 bits (docs/FORMAT.md), as do the
      // plugin schemes whose mix keeps it.
      const Layout* l = (name == "token_embd.weight" && scheme == "fp8") || by_plugin ? layout("bf16") : layout(scheme);
      const int64_t rows = mat_rows, cols = mat_cols;
      if (cols % l->block_elems != 0) return make_error(ErrorCode::unsupported, name + ": row length breaks the " + scheme + " block size");
      const int64_t row_bytes = cols / l->block_elems * l->block_bytes;
      auto& buf = storage->emplace_back(static_cast<size_t>(rows * row_bytes));
      std::vector<std::thread> pool;
      for (unsigned k = 0; k < threads; ++k) {
        const int64_t r0 = rows * k / threads, r1 = rows * (k + 1) / threads;
        pool.emplace_back(fill, std::cref(*l), buf.data(), cols, r0, r1, seed * 1000003 + storage->size() * 131 + k);
      }
      for (auto& th : pool) th.join();
      w.quant = src->strings.emplace_back(l->scheme).c_str();
      w.dtype = l->dtype;
      w.bytes = buf.size();
      w.data = buf.data();
    }
    src->weights.push_back(w);
  }
  src->mapping = storage;
  return src;
}

}  // namespace memra::bench
