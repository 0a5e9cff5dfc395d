// Published quantised checkpoints read as they are (memra_quant_api.import_tensor, SDK 2.12):
// tests/models/llama-fp8_block (DeepSeek / Qwen3-FP8 128x128 block scales) and llama-nvfp4
// (NVIDIA ModelOpt NVFP4), written by tests/models/make_quant_checkpoints.py from the llama
// fixture as the formats' public definitions lay them out. Oracle: each repacked weight,
// dequantised by its scheme's plugin, equals bitwise the value the format defines,
// computed here from the stored tensors (fp8: q * weight_scale_inv of the 128x128 block;
// nvfp4: (e2m1(code) * weight_scale) * weight_scale_2); the scale tensors are no tensors of
// the model. Bad forms (a scale of the wrong shape or dtype, a non-finite scale, a NaN
// code, rows that break the block) are refused naming the tensor, with nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "repack/checkpoint/safetensors.hpp"
#include "repack/format/reader.hpp"
#include "repack/quant/fp_convert.hpp"
#include "repack/tool/repack.hpp"
#include "tests/repack/test_writers.hpp"
#include "tests/repack_format/helpers.hpp"
#include "tests/support/build_plugins.hpp"
#include "tests/support/test_models.hpp"

namespace {

using namespace memra;
namespace fs = std::filesystem;
using repack_test::TempDir;

// `every`: the scheme of every tensor (--tensor-scheme '*=SCHEME'), "" for --quant keep.
Result<repack::RepackResult> repack_dir(const fs::path& src, const fs::path& dst, const std::string& every = "") {
  repack::RepackOptions o;
  o.plugins = &memra::testing::build_plugins();
  o.source = src;
  o.output = dst;
  if (!every.empty()) o.overrides = {{"*", every}};
  o.threads = 2;
  return repack::repack_checkpoint(o);
}

const plugins::QuantPlugin& plugin_for(const std::string& scheme) {
  static std::map<std::string, plugins::QuantPlugin> cache;
  auto it = cache.find(scheme);
  if (it == cache.end()) {
    auto q = memra::testing::build_plugins().quant_for(scheme, memra::testing::build_plugins().device_info());
    if (!q) throw std::runtime_error("no quant plugin for " + scheme);
    it = cache.emplace(scheme, std::move(*q)).first;
  }
  return it->second;
}

std::vector<float> dequantized(const format::Tensor& t) {
  const auto& e = *t.entry;
  const int64_t rows = static_cast<int64_t>(e.shape.at(0)), cols = static_cast<int64_t>(e.shape.at(1));
  std::vector<float> out(static_cast<size_t>(rows * cols));
  auto d = plugin_for(e.scheme).dequantize(e.scheme, std::span<const std::byte>(reinterpret_cast<const std::byte*>(t.data), e.bytes),
                                            rows, cols, out);
  EXPECT_TRUE(d.ok()) << e.name << ": " << (d.ok() ? "" : d.error().message);
  return out;
}

const safetensors::TensorView& stored(const safetensors::Checkpoint& c, const std::string& name) {
  const safetensors::TensorView* v = c.find(name);
  if (!v) throw std::runtime_error("checkpoint has no " + name);
  return *v;
}

float f32_at(const safetensors::TensorView& v, size_t i) {
  float f;
  std::memcpy(&f, v.data + 4 * i, 4);
  return f;
}

constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// Every linear weight of the decoder, as the checkpoint names it (the repack's source_name).
std::vector<const format::Tensor*> imported(const format::MemraModel& m, const std::string& scheme) {
  std::vector<const format::Tensor*> out;
  for (const format::Tensor& t : m.tensors())
    if (t.entry->scheme == scheme) out.push_back(&t);
  return out;
}

// tests/models/<model> repacked with --quant keep into tmp, opened, beside its checkpoint.
void repack_keep(const std::string& model, const TempDir& tmp, std::optional<format::MemraModel>& m,
                 std::optional<safetensors::Checkpoint>& ckpt) {
  const fs::path src = memra::testing::test_model(model);
  ASSERT_TRUE(fs::exists(src / "model.safetensors")) << src;
  auto r = repack_dir(src, tmp / "m.memra");
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto opened = format::MemraModel::open(tmp / "m.memra");
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  m.emplace(std::move(*opened));
  auto c = safetensors::Checkpoint::open(src.string());
  ASSERT_TRUE(c.ok());
  ckpt.emplace(std::move(*c));
}

TEST(QuantImport, Fp8BlockCheckpointIsReadAsPublished) {
  TempDir tmp;
  std::optional<format::MemraModel> m;
  std::optional<safetensors::Checkpoint> ckpt;
  ASSERT_NO_FATAL_FAILURE(repack_keep("llama-fp8_block", tmp, m, ckpt));
  const auto weights = imported(*m, "fp8");
  ASSERT_EQ(weights.size(), 14u) << "2 layers x 7 linear weights";
  for (const format::Tensor* t : weights) {
    const std::string& name = t->entry->source_name;
    const auto& q = stored(*ckpt, name);
    const auto& s = stored(*ckpt, name.substr(0, name.size() - 6) + "weight_scale_inv");
    const int64_t rows = static_cast<int64_t>(q.shape[0]), cols = static_cast<int64_t>(q.shape[1]);
    ASSERT_EQ(t->entry->shape, (std::vector<uint64_t>{q.shape[0], q.shape[1]})) << name;
    const std::vector<float> got = dequantized(*t);
    size_t differ = 0;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const float want = quant::f8_e4m3_to_f32(q.data[i * cols + j]) * f32_at(s, static_cast<size_t>((i / 128) * s.shape[1] + j / 128));
        differ += std::memcmp(&want, &got[static_cast<size_t>(i * cols + j)], 4) != 0;
      }
    EXPECT_EQ(differ, 0u) << name << ": values that are not q * weight_scale_inv of their block";
  }
  for (const format::Tensor& t : m->tensors())
    EXPECT_EQ(t.entry->name.find("scale"), std::string::npos) << t.entry->name << " is a scale, not a tensor of the model";
}

TEST(QuantImport, Nvfp4CheckpointIsReadAsPublished) {
  TempDir tmp;
  std::optional<format::MemraModel> m;
  std::optional<safetensors::Checkpoint> ckpt;
  ASSERT_NO_FATAL_FAILURE(repack_keep("llama-nvfp4", tmp, m, ckpt));
  const auto weights = imported(*m, "nvfp4");
  ASSERT_EQ(weights.size(), 14u);
  for (const format::Tensor* t : weights) {
    const std::string& name = t->entry->source_name;
    const std::string p = name.substr(0, name.size() - 6);
    const auto& codes = stored(*ckpt, name);
    const auto& s8 = stored(*ckpt, p + "weight_scale");
    const float g = f32_at(stored(*ckpt, p + "weight_scale_2"), 0);
    const int64_t rows = static_cast<int64_t>(codes.shape[0]), cols = 2 * static_cast<int64_t>(codes.shape[1]);
    ASSERT_EQ(t->entry->shape, (std::vector<uint64_t>{static_cast<uint64_t>(rows), static_cast<uint64_t>(cols)})) << name;
    const std::vector<float> got = dequantized(*t);
    size_t differ = 0;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const int c = (codes.data[i * (cols / 2) + j / 2] >> (4 * (j & 1))) & 15;
        const float v = (c & 8) ? -kE2M1[c & 7] : kE2M1[c & 7];
        const float want = (v * quant::f8_e4m3_to_f32(s8.data[i * (cols / 16) + j / 16])) * g;
        differ += std::memcmp(&want, &got[static_cast<size_t>(i * cols + j)], 4) != 0;
      }
    EXPECT_EQ(differ, 0u) << name << ": values that are not (e2m1 * weight_scale) * weight_scale_2";
  }
  for (const format::Tensor& t : m->tensors())
    EXPECT_EQ(t.entry->name.find("scale"), std::string::npos) << t.entry->name << " is a scale, not a tensor of the model";
}

// An imported weight converts to another scheme through its exact values: written as f32,
// it holds bitwise the values its fp8 repack dequantises to.
TEST(QuantImport, ImportedWeightsConvertThroughTheirExactValues) {
  const fs::path src = memra::testing::test_model("llama-fp8_block");
  TempDir tmp;
  auto f32 = repack_dir(src, tmp / "f32.memra", "f32");
  ASSERT_TRUE(f32.ok()) << f32.error().message;
  auto keep = repack_dir(src, tmp / "keep.memra");
  ASSERT_TRUE(keep.ok()) << keep.error().message;
  auto a = format::MemraModel::open(tmp / "f32.memra");
  auto b = format::MemraModel::open(tmp / "keep.memra");
  ASSERT_TRUE(a.ok() && b.ok());
  for (const format::Tensor* t : imported(*b, "fp8")) {
    const format::Tensor* f = a->find(t->entry->name);
    ASSERT_TRUE(f) << t->entry->name;
    ASSERT_EQ(f->entry->scheme, "f32");
    const std::vector<float> got = dequantized(*t);
    EXPECT_EQ(std::memcmp(got.data(), f->data, got.size() * 4), 0) << t->entry->name << ": --quant f32 is not the exact values";
  }
}

// ---- bad forms --------------------------------------------------------------------

// A copy of `model` whose safetensors file `edit` rewrote (config and tokenizer as they are).
fs::path edited(const fs::path& dir, const std::string& model, const std::function<void(std::vector<memra::testing::StTensor>&)>& edit) {
  const fs::path src = memra::testing::test_model(model);
  const fs::path out = dir / (model + "-edited");
  fs::create_directories(out);
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().filename() != "model.safetensors") fs::copy_file(e.path(), out / e.path().filename());
  auto ckpt = safetensors::Checkpoint::open(src.string());
  EXPECT_TRUE(ckpt.ok());
  std::vector<memra::testing::StTensor> ts;
  for (const safetensors::TensorView& v : ckpt->tensors())
    ts.push_back({v.name, safetensors::dtype_name(v.dtype), v.shape, std::vector<uint8_t>(v.data, v.data + v.nbytes)});
  edit(ts);
  const std::vector<uint8_t> bytes = memra::testing::write_safetensors(ts);
  repack_test::write_bytes(out / "model.safetensors", bytes.data(), bytes.size());
  return out;
}

memra::testing::StTensor& named(std::vector<memra::testing::StTensor>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

void expect_refused(const fs::path& src, const fs::path& dst, const std::string& names) {
  auto r = repack_dir(src, dst);
  ASSERT_FALSE(r.ok()) << src << " was repacked";
  EXPECT_NE(r.error().message.find(names), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(dst)) << "something was written for a refused checkpoint";
}

const std::string kQ = "model.layers.1.mlp.down_proj.";

TEST(QuantImport, Fp8ScaleOfTheWrongShapeIsRefused) {
  TempDir tmp;
  const fs::path src = edited(tmp.path(), "llama-fp8_block", [](auto& ts) {
    auto& s = named(ts, kQ + "weight_scale_inv");
    s.shape = {s.shape[1], s.shape[0]};  // [2][4] -> [4][2]
  });
  expect_refused(src, tmp / "out.memra", kQ + "weight_scale_inv");
}

TEST(QuantImport, Fp8ScaleOfAnIntegerDtypeIsRefused) {
  TempDir tmp;
  const fs::path src = edited(tmp.path(), "llama-fp8_block", [](auto& ts) { named(ts, kQ + "weight_scale_inv").dtype = "I32"; });
  expect_refused(src, tmp / "out.memra", kQ + "weight_scale_inv");
}

TEST(QuantImport, NonFiniteScalesAreRefused) {
  TempDir tmp;
  const float bad[2] = {std::nanf(""), INFINITY};
  for (int k = 0; k < 2; ++k) {
    const fs::path src = edited(tmp / std::to_string(k), "llama-fp8_block", [&](auto& ts) {
      std::memcpy(named(ts, kQ + "weight_scale_inv").data.data() + 4, &bad[k], 4);
    });
    expect_refused(src, tmp / ("out" + std::to_string(k) + ".memra"), kQ + "weight_scale_inv");
  }
  const fs::path n4 = edited(tmp / "n4", "llama-nvfp4", [&](auto& ts) {
    std::memcpy(named(ts, kQ + "weight_scale_2").data.data(), &bad[1], 4);
  });
  expect_refused(n4, tmp / "out-n4.memra", kQ + "weight_scale_2");
  const fs::path s8 = edited(tmp / "s8", "llama-nvfp4", [&](auto& ts) { named(ts, kQ + "weight_scale").data[5] = 0x7f; });
  expect_refused(s8, tmp / "out-s8.memra", kQ + "weight_scale");
}

TEST(QuantImport, Fp8NanCodeIsRefused) {
  TempDir tmp;
  const fs::path src = edited(tmp.path(), "llama-fp8_block", [](auto& ts) { named(ts, kQ + "weight").data[300] = 0xff; });
  expect_refused(src, tmp / "out.memra", kQ + "weight");
}

TEST(QuantImport, Nvfp4RowsThatBreakTheBlockAreRefused) {
  TempDir tmp;
  // down_proj [256][512] as [512][256] codes of 512 elements... made [256][504]: 1008 columns.
  const fs::path src = edited(tmp.path(), "llama-nvfp4", [](auto& ts) {
    auto& w = named(ts, kQ + "weight");
    auto& s = named(ts, kQ + "weight_scale");
    w.shape = {w.shape[0], w.shape[1] - 8};  // 16 fewer elements a row: not a multiple of 256
    w.data.resize(w.shape[0] * w.shape[1]);
    s.shape = {s.shape[0], s.shape[1] - 1};
    s.data.resize(s.shape[0] * s.shape[1]);
  });
  expect_refused(src, tmp / "out.memra", kQ + "weight");
}

TEST(QuantImport, Nvfp4WithoutItsSecondScaleIsRefused) {
  TempDir tmp;
  const fs::path src = edited(tmp.path(), "llama-nvfp4", [](auto& ts) {
    std::erase_if(ts, [](const auto& t) { return t.name == kQ + "weight_scale_2"; });
  });
  expect_refused(src, tmp / "out.memra", kQ + "weight");
}

}  // namespace
