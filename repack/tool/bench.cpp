#include "repack/tool/bench.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "memra_repack_bench.hpp"  // generated from bench_checkpoint.json
#include "repack/format/reader.hpp"
#include "repack/format/sha256.hpp"
#include "repack/tool/progress.hpp"
#include "repack/tool/repack.hpp"
#include "repack/tool/source.hpp"

namespace memra::repack {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Little-endian byte builder for the synthetic GGUF header.
struct Bytes {
  std::string b;
  void u32(uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); }
  void u64(uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); }
  void f32(float v) { b.append(reinterpret_cast<const char*>(&v), 4); }
  void str(const std::string& s) { u64(s.size()), b += s; }
  void kv_u32(const std::string& k, uint32_t v) { str(k), u32(4), u32(v); }
  void kv_f32(const std::string& k, float v) { str(k), u32(6), f32(v); }
  void kv_str(const std::string& k, const std::string& v) { str(k), u32(8), str(v); }
};

struct Spec {
  std::string name;
  std::vector<uint64_t> shape;  // outermost first
  bool matrix;
};

// llama-7B-like widths; the layer count sets the size.
constexpr uint64_t kHidden = 4096, kFfn = 11008, kVocab = 32000;

std::vector<Spec> llama_specs(int layers, bool gguf_names) {
  std::vector<Spec> s;
  auto name = [&](const std::string& g, const std::string& hf) { return gguf_names ? g : hf; };
  s.push_back({name("token_embd.weight", "model.embed_tokens.weight"), {kVocab, kHidden}, true});
  for (int l = 0; l < layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".", h = "model.layers." + std::to_string(l) + ".";
    s.push_back({name(b + "attn_norm.weight", h + "input_layernorm.weight"), {kHidden}, false});
    s.push_back({name(b + "attn_q.weight", h + "self_attn.q_proj.weight"), {kHidden, kHidden}, true});
    s.push_back({name(b + "attn_k.weight", h + "self_attn.k_proj.weight"), {kHidden, kHidden}, true});
    s.push_back({name(b + "attn_v.weight", h + "self_attn.v_proj.weight"), {kHidden, kHidden}, true});
    s.push_back({name(b + "attn_output.weight", h + "self_attn.o_proj.weight"), {kHidden, kHidden}, true});
    s.push_back({name(b + "ffn_norm.weight", h + "post_attention_layernorm.weight"), {kHidden}, false});
    s.push_back({name(b + "ffn_gate.weight", h + "mlp.gate_proj.weight"), {kFfn, kHidden}, true});
    s.push_back({name(b + "ffn_up.weight", h + "mlp.up_proj.weight"), {kFfn, kHidden}, true});
    s.push_back({name(b + "ffn_down.weight", h + "mlp.down_proj.weight"), {kHidden, kFfn}, true});
  }
  s.push_back({name("output_norm.weight", "model.norm.weight"), {kHidden}, false});
  s.push_back({name("output.weight", "lm_head.weight"), {kVocab, kHidden}, true});
  return s;
}

uint64_t elements(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

// Appends `n` pseudo-random bytes (xorshift), each 64-bit word masked and or-ed (content
// does not matter to the copy path; bf16 data is kept finite so it can be quantized).
void fill_random(std::ofstream& out, uint64_t n, uint64_t& state, uint64_t mask = ~uint64_t{0}, uint64_t set = 0) {
  std::vector<uint64_t> buf(1 << 20);
  while (n > 0) {
    for (uint64_t& w : buf) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      w = (state & mask) | set;
    }
    const uint64_t k = std::min<uint64_t>(n, buf.size() * 8);
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(k));
    n -= k;
  }
}

int layers_for(uint64_t size_mb, double bytes_per_element) {
  const double per_layer = (4.0 * kHidden * kHidden + 3.0 * kHidden * kFfn) * bytes_per_element;
  const double fixed = 2.0 * kVocab * kHidden * bytes_per_element;
  return std::max(1, static_cast<int>((static_cast<double>(size_mb) * 1e6 - fixed) / per_layer + 0.5));
}

// A llama GGUF of random Q4_K matrices (f32 norms), no tokenizer.
bool write_synthetic_gguf(const fs::path& path, uint64_t size_mb) {
  const int layers = layers_for(size_mb, 144.0 / 256.0);
  const auto specs = llama_specs(layers, true);
  Bytes h;
  h.b = "GGUF";
  h.u32(3);
  h.u64(specs.size());
  h.u64(10);
  const std::string arch = nlohmann::json::parse(kBenchCheckpoint)["gguf_architecture"].get<std::string>();
  h.kv_str("general.architecture", arch);
  h.kv_u32("tokenizer.ggml.eos_token_id", 2);
  h.kv_u32(arch + ".block_count", static_cast<uint32_t>(layers));
  h.kv_u32(arch + ".embedding_length", kHidden);
  h.kv_u32(arch + ".feed_forward_length", kFfn);
  h.kv_u32(arch + ".attention.head_count", 32);
  h.kv_u32(arch + ".attention.head_count_kv", 32);
  h.kv_u32(arch + ".context_length", 4096);
  h.kv_u32(arch + ".vocab_size", kVocab);
  h.kv_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  uint64_t offset = 0;
  std::vector<uint64_t> sizes;
  for (const Spec& s : specs) {
    h.str(s.name);
    h.u32(static_cast<uint32_t>(s.shape.size()));
    for (auto it = s.shape.rbegin(); it != s.shape.rend(); ++it) h.u64(*it);  // ggml order
    h.u32(s.matrix ? 12u : 0u);                                               // Q4_K : F32
    h.u64(offset);
    const uint64_t bytes = s.matrix ? elements(s.shape) / 256 * 144 : elements(s.shape) * 4;
    sizes.push_back(bytes);
    offset += (bytes + 31) / 32 * 32;
  }
  h.b.resize((h.b.size() + 31) / 32 * 32, '\0');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(h.b.data(), static_cast<std::streamsize>(h.b.size()));
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (uint64_t b : sizes) {
    fill_random(out, b, state);
    const uint64_t pad = (b + 31) / 32 * 32 - b;
    out.write("\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", static_cast<std::streamsize>(pad));
  }
  return static_cast<bool>(out);
}

// A llama safetensors directory of random bf16 weights.
bool write_synthetic_safetensors(const fs::path& dir, uint64_t size_mb) {
  const int layers = layers_for(size_mb, 2.0);
  const auto specs = llama_specs(layers, false);
  fs::create_directories(dir);
  nlohmann::json config = nlohmann::json::parse(kBenchCheckpoint)["hf_config"];
  config["vocab_size"] = kVocab;
  config["hidden_size"] = kHidden;
  config["intermediate_size"] = kFfn;
  config["num_hidden_layers"] = layers;
  std::ofstream cfg(dir / "config.json");
  cfg << config.dump();
  cfg.close();
  std::string header = "{";
  uint64_t offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const uint64_t bytes = elements(specs[i].shape) * 2;
    std::string shape;
    for (uint64_t d : specs[i].shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    header += (i ? "," : "") + ("\"" + specs[i].name + "\":{\"dtype\":\"BF16\",\"shape\":[" + shape + "],\"data_offsets\":[" +
                                std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}");
    offset += bytes;
  }
  header += "}";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::ofstream out(dir / "model.safetensors", std::ios::binary | std::ios::trunc);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(header.data(), static_cast<std::streamsize>(n));
  // bf16 values of magnitude 2^-7..2^-6 with random signs and mantissas.
  uint64_t state = 0x2545f4914f6cdd1dull;
  fill_random(out, offset, state, 0x80ff80ff80ff80ffull, 0x3c003c003c003c00ull);
  return static_cast<bool>(out);
}

double seconds(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// CPU seconds (user + system) this process has used, all threads.
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Wall time and CPU time of the best run.
struct Timing {
  double wall = 1e30;
  double cpu = 1e30;
  void add(double w, double c) {
    if (w < wall) wall = w, cpu = c;
  }
};

uint64_t tree_bytes(const fs::path& p) {
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return fs::file_size(p, ec);
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(p, ec))
    if (e.is_regular_file(ec)) n += e.file_size(ec);
  return n;
}

void row(const char* what, double bytes, const Timing& t) {
  std::printf("  %-44s %8.3f s %7.2f GB/s   cpu %7.3f s (%5.2f GB per cpu-s)\n", what, t.wall, bytes / 1e9 / t.wall, t.cpu,
              bytes / 1e9 / std::max(t.cpu, 1e-9));
}

// Best-of-N keep repack of `src`; fsync on or off.
bool bench_keep(const fs::path& src, const fs::path& work, const BenchOptions& o, bool fsync, Timing* best) {
  for (int r = 0; r < o.repeats; ++r) {
    const fs::path out = work / ("bench-out-" + std::to_string(::getpid()) + ".memra");
    std::error_code ec;
    fs::remove_all(out, ec);
    RepackOptions ro;
    ro.plugins = o.plugins;
    ro.source = src;
    ro.output = out;
    ro.threads = o.threads;
    ro.fsync = fsync;
    const auto t = Clock::now();
    const double c0 = cpu_seconds();
    auto res = repack_checkpoint(ro);
    const double s = seconds(t), c = cpu_seconds() - c0;
    fs::remove_all(out, ec);
    if (!res) {
      std::fprintf(stderr, "memra-repack --bench: %s\n", res.error().message.c_str());
      return false;
    }
    best->add(s, c);
  }
  return true;
}

}  // namespace

namespace {

int bench_body(const BenchOptions& o, const fs::path& work);

}  // namespace

int run_bench(const BenchOptions& o) {
  std::error_code ec;
  const fs::path work = o.work_dir.empty() ? fs::temp_directory_path() / ("memra-repack-bench-" + std::to_string(::getpid())) : o.work_dir;
  fs::create_directories(work, ec);
  const int rc = bench_body(o, work);
  if (o.work_dir.empty()) fs::remove_all(work, ec);
  return rc;
}

namespace {

int bench_body(const BenchOptions& o, const fs::path& work) {
  std::error_code ec;
  fs::path gguf = o.gguf, st = o.safetensors;
  std::printf("memra-repack --bench (%u hardware threads, best of %d)\n", std::thread::hardware_concurrency(), o.repeats);
  if (gguf.empty()) {
    gguf = work / "synthetic-k-quant.gguf";
    std::printf("  writing a synthetic %llu MB Q4_K llama GGUF to %s\n", static_cast<unsigned long long>(o.size_mb), gguf.c_str());
    if (!write_synthetic_gguf(gguf, o.size_mb)) return 1;
  }
  if (st.empty()) {
    st = work / "synthetic-bf16";
    std::printf("  writing a synthetic %llu MB bf16 llama safetensors dir to %s\n", static_cast<unsigned long long>(o.size_mb), st.c_str());
    if (!write_synthetic_safetensors(st, o.size_mb)) return 1;
  }
  int rc = 0;
  for (const auto& [label, src] : {std::pair<const char*, fs::path>{"GGUF", gguf}, {"safetensors", st}}) {
    const double bytes = static_cast<double>(tree_bytes(src));
    std::printf("\n%s source %s (%s)\n", label, src.c_str(), human_bytes(bytes).c_str());
    // Warm the page cache (and time a plain sha256 pass while at it).
    Timing hash_t, open_t;
    for (int r = 0; r < o.repeats; ++r) {
      const auto t = Clock::now();
      const double c0 = cpu_seconds();
      auto s = Source::open(src, *o.plugins);
      if (!s) {
        std::fprintf(stderr, "memra-repack --bench: %s\n", s.error().message.c_str());
        return 1;
      }
      for (const fs::path& f : (*s)->weight_files()) {
        auto h = format::sha256_file(f.string());
        if (!h) return 1;
      }
      hash_t.add(seconds(t), cpu_seconds() - c0);
    }
    for (int r = 0; r < o.repeats; ++r) {
      const auto t = Clock::now();
      const double c0 = cpu_seconds();
      auto s = Source::open(src, *o.plugins);
      if (!s) return 1;
      open_t.add(seconds(t), cpu_seconds() - c0);
    }
    row("open + validate (headers, bounds, config)", bytes, open_t);
    row("open + validate + sha256 of the source", bytes, hash_t);
    Timing keep_nosync, keep_sync;
    if (!bench_keep(src, work, o, false, &keep_nosync) || !bench_keep(src, work, o, true, &keep_sync)) {
      rc = 1;
      continue;
    }
    row("repack keep (no fsync)", bytes, keep_nosync);
    row("repack keep (fsync: durable on disk)", bytes, keep_sync);
    // Reading it back: open (validation) and a full checksum verification.
    const fs::path out = work / ("bench-read-" + std::to_string(::getpid()) + ".memra");
    fs::remove_all(out, ec);
    RepackOptions ro;
    ro.plugins = o.plugins;
    ro.source = src;
    ro.output = out;
    ro.threads = o.threads;
    ro.fsync = false;
    if (!repack_checkpoint(ro)) return 1;
    Timing mopen, verify;
    for (int r = 0; r < o.repeats; ++r) {
      auto t = Clock::now();
      double c0 = cpu_seconds();
      auto m = format::MemraModel::open(out);
      if (!m) return 1;
      mopen.add(seconds(t), cpu_seconds() - c0);
      t = Clock::now();
      c0 = cpu_seconds();
      if (!m->verify_checksums(o.threads)) return 1;
      verify.add(seconds(t), cpu_seconds() - c0);
    }
    fs::remove_all(out, ec);
    row(".memra open (manifest + bounds + mmap)", bytes, mopen);
    row(".memra verify every tensor's crc32c", bytes, verify);
  }
  return rc;
}

}  // namespace

}  // namespace memra::repack
