#include "tests/repack_format/helpers.hpp"
#include "tests/support/checkpoint_config.hpp"
#include "tests/support/command.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "repack/checkpoint/model_config.hpp"
#include "repack/checkpoint/safetensors.hpp"
#include "repack/format/sha256.hpp"

namespace memra::repack_test {

namespace fs = std::filesystem;

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_bytes(const fs::path& p, const void* data, size_t n) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

std::string sha256_file(const fs::path& p) {
  const auto bytes = read_bytes(p);
  return format::sha256_hex(bytes.data(), bytes.size());
}

std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

int run_command(const std::string& cmd, std::string* output, bool merge_stderr) {
  memra::testing::CommandResult r = memra::testing::run_command(cmd, merge_stderr ? memra::testing::Stderr::merge : memra::testing::Stderr::pass);
  if (output) *output = std::move(r.out);
  return r.exit_code;
}

std::map<std::string, OriginalTensor> llama_originals_gguf_order() {
  std::map<std::string, OriginalTensor> out;
  const fs::path dir = memra::testing::fixture("models/llama");
  auto family = memra::testing::hf_family(dir.string());
  auto ckpt = safetensors::Checkpoint::open(dir.string());
  if (!family || !ckpt) {
    ADD_FAILURE() << "cannot open " << dir;
    return out;
  }
  for (const safetensors::TensorView& t : ckpt->tensors()) {
    const auto canonical = family->canonical_name(t.name);
    if (!canonical || !*canonical) continue;
    const auto& name = *canonical;
    auto values = safetensors::to_f32(t);
    if (!values) {
      ADD_FAILURE() << values.error().message;
      continue;
    }
    OriginalTensor o{t.shape, std::move(*values)};
    const bool q = name->ends_with("attn_q.weight"), k = name->ends_with("attn_k.weight");
    if (q || k) {
      // llama.cpp's converter: reshape(heads, 2, rows/heads/2, cols).swapaxes(1, 2): GGUF row
      // h*hd + 2j + s holds HF row h*hd + s*hd/2 + j.
      const int64_t heads = memra::testing::family_keys(family->config).at(q ? "num_heads" : "num_kv_heads").get<int64_t>();
      const auto rows = static_cast<int64_t>(t.shape[0]), cols = static_cast<int64_t>(t.shape[1]);
      const int64_t hd = rows / heads;
      std::vector<float> p(o.values.size());
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = 0; j < hd / 2; ++j)
          for (int64_t s = 0; s < 2; ++s)
            std::copy_n(o.values.begin() + (h * hd + s * hd / 2 + j) * cols, cols, p.begin() + (h * hd + 2 * j + s) * cols);
      o.values = std::move(p);
    }
    out[*name] = std::move(o);
  }
  return out;
}

}  // namespace memra::repack_test
