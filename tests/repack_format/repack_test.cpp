// memra-repack's pipeline on the fixtures: `keep` round-trips every fixture file exactly
// (tensor bytes, config, tokenizer), quantized repacks decode within the quantizers'
// error, corrupt or truncated sources are refused with nothing written and nothing
// recorded, and the registry receives the provenance.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>

#include "registry/registry.hpp"
#include "repack/checkpoint/gguf.hpp"
#include "repack/checkpoint/gguf_tokenizer.hpp"
#include "repack/checkpoint/safetensors.hpp"
#include "repack/format/gguf_vocab_file.hpp"
#include "repack/format/reader.hpp"
#include "repack/format/sha256.hpp"
#include "repack/quant/dequant.hpp"
#include "repack/quant/fp_convert.hpp"
#include "repack/tool/provenance.hpp"
#include "repack/tool/repack.hpp"
#include "repack/tool/source.hpp"
#include "tests/repack_format/helpers.hpp"
#include "tests/support/build_plugins.hpp"

namespace {

using namespace memra;
namespace fs = std::filesystem;
using repack_test::TempDir;

std::vector<std::string> fixture_sources() {
  std::vector<std::string> out;
  for (const char* m : {"llama", "qwen3"}) out.push_back(std::string("models/") + m);
  for (const char* t : {"BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_XS"}) out.push_back(std::string("gguf/llama/llama-") + t + ".gguf");
  return out;
}

Result<repack::RepackResult> run_repack(const fs::path& src, const fs::path& dst, const std::string& quant = "keep") {
  repack::RepackOptions o;
  o.plugins = &memra::testing::build_plugins();
  o.source = src;
  o.output = dst;
  o.quant = quant;
  o.threads = 2;
  return repack::repack_checkpoint(o);
}

class RepackKeep : public ::testing::TestWithParam<std::string> {};

// Every tensor's bytes equal the source's (1-D floats: the exact float32 of the source
// values), the config is the source's, the tokenizer files are copied byte for byte.
TEST_P(RepackKeep, RoundTripsExactly) {
  MEMRA_REQUIRE_FIXTURES();
  const fs::path src = memra::testing::fixtures_dir() / GetParam();
  TempDir tmp;
  const fs::path dst = tmp / "out.memra";
  auto r = run_repack(src, dst);
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto m = format::MemraModel::open(dst, {true, 2});
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto source = repack::Source::open(src, memra::testing::build_plugins());
  ASSERT_TRUE(source.ok()) << source.error().message;
  EXPECT_EQ(model_config_to_json(m->config()), model_config_to_json((*source)->config()));
  ASSERT_EQ(m->tensors().size(), (*source)->tensors().size());
  size_t widened = 0;
  for (const repack::SourceTensor& st : (*source)->tensors()) {
    const format::Tensor* t = m->find(st.name);
    ASSERT_NE(t, nullptr) << st.name;
    EXPECT_EQ(t->entry->source_name, st.source_name);
    EXPECT_EQ(t->entry->shape, st.shape) << st.name;
    EXPECT_EQ(t->entry->source_scheme, st.scheme) << st.name;
    if (t->entry->scheme == st.scheme) {
      ASSERT_EQ(t->entry->bytes, st.bytes) << st.name;
      EXPECT_EQ(std::memcmp(t->data, st.data, st.bytes), 0) << st.name << ": bytes differ from the source";
    } else {
      // Only 1-D float tensors change, to float32, exactly.
      ASSERT_EQ(st.shape.size(), 1u) << st.name << " changed scheme under keep";
      ASSERT_EQ(t->entry->scheme, "f32") << st.name;
      std::vector<float> want(st.shape[0]), got(st.shape[0]);
      ASSERT_TRUE((*source)->to_f32(st, 0, want.size(), want.data()).ok());
      std::memcpy(got.data(), t->data, got.size() * 4);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << st.name;
      ++widened;
    }
  }
  if (src.extension() == ".gguf") {
    EXPECT_EQ(widened, 0u) << "llama.cpp stores norms as F32 already";
    auto file = gguf::File::open(src.string(), {false});
    ASSERT_TRUE(file.ok());
    auto want = gguf::read_tokenizer(*file);
    ASSERT_TRUE(want.ok());
    auto got = format::read_gguf_tokenizer(dst);
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(got->tokens, want->tokens);
    EXPECT_EQ(got->merges, want->merges);
    EXPECT_EQ(got->token_types, want->token_types);
    EXPECT_EQ(got->eos_id, want->eos_id);
    EXPECT_EQ(got->pre, want->pre);
    EXPECT_EQ(m->manifest().tokenizer.kind, "gguf");
  } else {
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      EXPECT_EQ(repack_test::read_bytes(dst / f), repack_test::read_bytes(src / f)) << f;
    for (const char* f : {"config.json", "generation_config.json"})
      EXPECT_EQ(repack_test::read_bytes(dst / "source" / f), repack_test::read_bytes(src / f)) << f;
    EXPECT_EQ(m->manifest().tokenizer.kind, "hf");
  }
  // Provenance inside the manifest: the source file's digest.
  const fs::path weights = src.extension() == ".gguf" ? src : src / "model.safetensors";
  EXPECT_EQ(m->manifest().source.sha256, repack_test::sha256_file(weights));
  EXPECT_EQ(m->manifest().source.size, fs::file_size(weights));
  EXPECT_EQ(m->manifest().source.format, src.extension() == ".gguf" ? "gguf" : "safetensors");
  EXPECT_EQ(r->manifest_sha256, repack_test::sha256_file(dst / "manifest.json"));
}

INSTANTIATE_TEST_SUITE_P(MemraRepack, RepackKeep, ::testing::ValuesIn(fixture_sources()), [](const auto& info) {
  std::string n = fs::path(info.param).stem().string();
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

// Quantized repacks: every matrix decodes (through the exact dequantizers) to within
// the scheme's error of the original; the precision choices are the documented ones.
TEST(MemraRepack, QuantizedRepackDecodesNearTheOriginal) {
  MEMRA_REQUIRE_FIXTURES();
  const fs::path src = memra::testing::fixture("models/llama");
  auto source = repack::Source::open(src, memra::testing::build_plugins());
  ASSERT_TRUE(source.ok());
  // Relative rms error bounds per scheme (4-bit ~ 1/16 of the range, ...).
  // Uniform rounding of a Gaussian block: rms error ~ step/sqrt(12), step ~ range/levels.
  const std::vector<std::pair<std::string, double>> schemes = {{"q8_0", 0.008}, {"q6_k", 0.03}, {"q5_k", 0.06},
                                                               {"q4_k", 0.12},  {"iq4_xs", 0.12}, {"q4_0", 0.12},
                                                               {"fp8", 0.05},   {"bf16", 0.004}};
  for (const auto& [quant, bound] : schemes) {
    TempDir tmp;
    auto r = run_repack(src, tmp / "q.memra", quant);
    ASSERT_TRUE(r.ok()) << quant << ": " << r.error().message;
    auto m = format::MemraModel::open(tmp / "q.memra", {true, 2});
    ASSERT_TRUE(m.ok()) << m.error().message;
    for (const repack::SourceTensor& st : (*source)->tensors()) {
      const format::Tensor* t = m->find(st.name);
      ASSERT_NE(t, nullptr);
      const std::string& scheme = t->entry->scheme;
      if (st.shape.size() == 1) {
        EXPECT_EQ(scheme, "f32") << st.name;
        continue;
      }
      // The head and attn_v get 6 bits under the 4/5-bit targets.
      const bool upgraded = (quant == "q4_k" || quant == "q5_k" || quant == "iq4_xs" || quant == "q4_0") &&
                            (st.name == "output.weight" || st.name.ends_with("attn_v.weight"));
      EXPECT_EQ(scheme, upgraded ? "q6_k" : (quant == "fp8" && (st.name == "output.weight" || st.name == "token_embd.weight")) ? "bf16" : quant)
          << quant << " " << st.name;
      const uint64_t n = repack::element_count(st.shape);
      std::vector<float> want(n), got(n);
      ASSERT_TRUE((*source)->to_f32(st, 0, n, want.data()).ok());
      repack::SourceTensor out{st.source_name, st.name, st.shape, scheme == "fp8" ? "f32" : scheme, t->data, t->entry->bytes, {}};
      if (scheme == "fp8") {
        const uint64_t cols = st.shape.back(), groups = cols / 128, rb = groups * 4 + cols;
        for (uint64_t row = 0; row < n / cols; ++row)
          for (uint64_t c = 0; c < cols; ++c) {
            float s;
            std::memcpy(&s, t->data + row * rb + (c / 128) * 4, 4);
            got[row * cols + c] = quant::f8_e4m3_to_f32(t->data[row * rb + groups * 4 + c]) * s;
          }
      } else {
        ASSERT_TRUE((*source)->to_f32(out, 0, n, got.data()).ok()) << scheme;
      }
      double se = 0, ss = 0;
      for (uint64_t i = 0; i < n; ++i) se += std::pow(got[i] - want[i], 2.0), ss += std::pow(want[i], 2.0);
      const double rel = std::sqrt(se / ss);
      const double b = upgraded ? 0.03 : bound;
      EXPECT_LE(rel, b) << quant << " " << st.name << " (" << scheme << ")";
    }
    EXPECT_EQ(m->manifest().precision.requested, quant);
    EXPECT_FALSE(m->manifest().precision.rules.empty());
  }
}

// The family plugin names the matrices a quantizing repack keeps as stored (its plan's
// "keep_as_stored": MoE routers and the shared expert's gate); repack holds no list of its own.
TEST(MemraRepack, TheFamilysRoutersStayAsStoredUnderQuantization) {
  MEMRA_REQUIRE_FIXTURES();
  for (const char* model : {"models/qwen3_moe", "models/qwen3_next"}) {
    SCOPED_TRACE(model);
    const fs::path src = memra::testing::fixture(model);
    auto source = repack::Source::open(src, memra::testing::build_plugins());
    ASSERT_TRUE(source.ok()) << source.error().message;
    TempDir tmp;
    auto r = run_repack(src, tmp / "q.memra", "q8_0");
    ASSERT_TRUE(r.ok()) << r.error().message;
    auto m = format::MemraModel::open(tmp / "q.memra", {true, 2});
    ASSERT_TRUE(m.ok()) << m.error().message;
    int routers = 0, shared_gates = 0, quantized = 0;
    for (const repack::SourceTensor& st : (*source)->tensors()) {
      const format::Tensor* t = m->find(st.name);
      ASSERT_NE(t, nullptr) << st.name;
      const bool router = st.name.ends_with("ffn_gate_inp.weight") || st.name.ends_with("ffn_gate_inp_shexp.weight");
      routers += st.name.ends_with("ffn_gate_inp.weight");
      shared_gates += st.name.ends_with("ffn_gate_inp_shexp.weight");
      if (router) EXPECT_EQ(t->entry->scheme, st.scheme) << st.name << " is a router: kept as stored";
      quantized += t->entry->scheme == "q8_0";
    }
    EXPECT_GT(routers, 0);
    if (std::string(model) == "models/qwen3_next") EXPECT_GT(shared_gates, 0);
    EXPECT_GT(quantized, 0);
    bool recorded = false;
    for (const format::PrecisionRule& rule : m->manifest().precision.rules)
      recorded = recorded || (rule.tensors.find("family plugin") != std::string::npos && rule.reason.find("MoE router") != std::string::npos);
    EXPECT_TRUE(recorded) << "precision.rules record the family's reason";
  }
}

// Corrupt and truncated sources: refused before anything is created next to DST.
TEST(MemraRepack, CorruptOrTruncatedSourceIsRefusedWithNothingWritten) {
  MEMRA_REQUIRE_FIXTURES();
  TempDir tmp;
  const fs::path bad = tmp / "bad";
  fs::create_directories(bad);
  const auto gguf = repack_test::read_bytes(memra::testing::fixture("gguf/llama/llama-Q4_K_M.gguf"));
  const auto st = repack_test::read_bytes(memra::testing::fixture("models/llama/model.safetensors"));
  std::vector<std::pair<std::string, fs::path>> cases;
  // GGUF cut short (the last tensor's bytes are missing).
  repack_test::write_bytes(bad / "truncated.gguf", gguf.data(), gguf.size() - 4096);
  cases.push_back({"truncated gguf", bad / "truncated.gguf"});
  // GGUF with a tensor count far beyond what the header holds.
  auto g2 = gguf;
  g2[8] = 0xff, g2[9] = 0xff, g2[10] = 0xff;
  repack_test::write_bytes(bad / "header.gguf", g2.data(), g2.size());
  cases.push_back({"corrupt gguf header", bad / "header.gguf"});
  // Not a GGUF at all.
  repack_test::write_bytes(bad / "noise.gguf", st.data() + 100, 5000);
  cases.push_back({"garbage", bad / "noise.gguf"});
  // safetensors dirs: truncated data, and a damaged JSON header.
  for (const char* name : {"st_trunc", "st_header"}) {
    fs::create_directories(bad / name);
    for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(memra::testing::fixture("models/llama") / f, bad / name / f);
  }
  repack_test::write_bytes(bad / "st_trunc/model.safetensors", st.data(), st.size() - 1000);
  cases.push_back({"truncated safetensors", bad / "st_trunc"});
  auto s2 = st;
  s2[20] = '#';
  repack_test::write_bytes(bad / "st_header/model.safetensors", s2.data(), s2.size());
  cases.push_back({"corrupt safetensors header", bad / "st_header"});
  cases.push_back({"missing source", bad / "nope.gguf"});

  const fs::path out_parent = tmp / "out";
  fs::create_directories(out_parent);
  for (const auto& [what, path] : cases) {
    repack::RepackOptions o;
    o.plugins = &memra::testing::build_plugins();
    o.source = path;
    o.output = out_parent / "x.memra";
    auto r = repack::repack_checkpoint(o);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_TRUE(repack_test::list_dir(out_parent).empty()) << what << " left files behind";
    std::cout << "[ " << what << " ] " << r.error().message << "\n";
  }
}

// A checkpoint whose architecture no installed family serves has no config to repack
// with: refused by name before anything is written.
TEST(MemraRepack, RefusesArchitecturesNoFamilyServes) {
  MEMRA_REQUIRE_FIXTURES();
  // The llama fixture's files under an architecture no installed family serves.
  TempDir src;
  const fs::path llama = memra::testing::fixture("models/llama");
  for (const auto& f : fs::directory_iterator(llama))
    if (f.path().filename() != "config.json") fs::copy_file(f.path(), src.path() / f.path().filename());
  nlohmann::json config = nlohmann::json::parse(std::ifstream(llama / "config.json"));
  config["architectures"] = {"FalconForCausalLM"};
  config["model_type"] = "falcon";
  std::ofstream(src.path() / "config.json") << config.dump(2);
  {
    SCOPED_TRACE("FalconForCausalLM");
    TempDir tmp;
    const fs::path dst = tmp / "out.memra";
    auto r = run_repack(src.path(), dst);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::unsupported);
    EXPECT_NE(r.error().message.find("is not supported"), std::string::npos) << r.error().message;
    EXPECT_FALSE(fs::exists(dst));
    EXPECT_TRUE(fs::is_empty(tmp.path())) << "nothing may be written for a refused checkpoint";
  }
}

// The registry holds the checkpoint (sha256 of the source file) and the repack (tool
// version, options, the manifest's sha256) once the output is in place.
TEST(MemraRepack, ProvenanceLandsInTheRegistry) {
  MEMRA_REQUIRE_FIXTURES();
  TempDir tmp;
  const fs::path reg = tmp / "registry.db";
  for (const std::string src : {"gguf/llama/llama-Q4_K_M.gguf", "models/qwen3"}) {
    repack::RepackOptions o;
    o.plugins = &memra::testing::build_plugins();
    o.source = memra::testing::fixtures_dir() / src;
    o.output = tmp / (fs::path(src).stem().string() + ".memra");
    o.quant = src.ends_with(".gguf") ? "keep" : "q8_0";
    auto r = repack::repack_checkpoint(o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    auto ids = repack::record_provenance(reg, *r, o);
    ASSERT_TRUE(ids.ok()) << ids.error().message;
    auto db = registry::Registry::open(reg);
    ASSERT_TRUE(db.ok());
    auto c = db->find_checkpoint(std::to_string(ids->checkpoint_id));
    ASSERT_TRUE(c.ok()) << c.error().message;
    const fs::path weights = src.ends_with(".gguf") ? memra::testing::fixtures_dir() / src : memra::testing::fixtures_dir() / src / "model.safetensors";
    EXPECT_EQ(c->sha256, repack_test::sha256_file(weights));
    EXPECT_EQ(c->size_bytes, fs::file_size(weights));
    EXPECT_EQ(c->format, src.ends_with(".gguf") ? registry::CheckpointFormat::gguf : registry::CheckpointFormat::safetensors);
    EXPECT_EQ(c->family, "llama");  // the family plugin (the gate's key), for Qwen3 too
    EXPECT_EQ(c->architecture, src.ends_with(".gguf") ? "LlamaForCausalLM" : "Qwen3ForCausalLM");
    EXPECT_EQ(c->quant, src.ends_with(".gguf") ? "q4_k" : "bf16");
    EXPECT_EQ(fs::path(c->source_path), fs::absolute(memra::testing::fixtures_dir() / src).lexically_normal());
    auto reps = db->list_repacks(ids->checkpoint_id);
    ASSERT_TRUE(reps.ok());
    ASSERT_EQ(reps->size(), 1u);
    const registry::Repack& rep = reps->front();
    EXPECT_EQ(rep.id, ids->repack_id);
    EXPECT_EQ(rep.output_hash, repack_test::sha256_file(o.output / "manifest.json"));
    EXPECT_EQ(fs::path(rep.output_path), fs::absolute(o.output));
    EXPECT_EQ(rep.tool_version, repack::tool_version());
    const auto opts = nlohmann::json::parse(rep.options_json);
    EXPECT_EQ(opts["quant"], o.quant);
    // The output path finds the checkpoint too.
    auto by_output = db->find_checkpoint(o.output.string());
    ASSERT_TRUE(by_output.ok());
    EXPECT_EQ(by_output->id, ids->checkpoint_id);
  }
}

// A GGUF source under a quantization target: tensors already in the target scheme are
// carried bit for bit, the others dequantized exactly and re-quantized.
TEST(MemraRepack, GgufSourceIsRequantized) {
  MEMRA_REQUIRE_FIXTURES();
  const fs::path src = memra::testing::fixture("gguf/llama/llama-Q4_K_M.gguf");
  TempDir tmp;
  auto r = run_repack(src, tmp / "q.memra", "q6_k");
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto m = format::MemraModel::open(tmp / "q.memra", {true, 2});
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto source = repack::Source::open(src, memra::testing::build_plugins());
  ASSERT_TRUE(source.ok());
  int carried = 0, requantized = 0;
  for (const repack::SourceTensor& st : (*source)->tensors()) {
    const format::Tensor* t = m->find(st.name);
    ASSERT_NE(t, nullptr);
    if (st.shape.size() == 1) continue;
    EXPECT_EQ(t->entry->scheme, "q6_k") << st.name;
    if (st.scheme == "q6_k") {
      EXPECT_EQ(std::memcmp(t->data, st.data, st.bytes), 0) << st.name;
      ++carried;
      continue;
    }
    // Re-quantizing already-quantized values to 6 bits loses little more.
    const uint64_t n = repack::element_count(st.shape);
    std::vector<float> want(n), got(n);
    ASSERT_TRUE((*source)->to_f32(st, 0, n, want.data()).ok());
    repack::SourceTensor out{st.source_name, st.name, st.shape, "q6_k", t->data, t->entry->bytes, {}};
    ASSERT_TRUE((*source)->to_f32(out, 0, n, got.data()).ok());
    double se = 0, ss = 0;
    for (uint64_t i = 0; i < n; ++i) se += std::pow(got[i] - want[i], 2.0), ss += std::pow(want[i], 2.0);
    EXPECT_LE(std::sqrt(se / ss), 0.03) << st.name;
    ++requantized;
  }
  EXPECT_GT(carried, 0);
  EXPECT_GT(requantized, 0);
}

// A checkpoint split into two shards with an index: same tensors as the single file, and
// the checkpoint digest is the sorted-listing digest of the shards.
TEST(MemraRepack, ShardedSafetensorsSource) {
  MEMRA_REQUIRE_FIXTURES();
  const fs::path one = memra::testing::fixture("models/llama");
  TempDir tmp;
  const fs::path dir = tmp / "sharded";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}) fs::copy_file(one / f, dir / f);
  // Split model.safetensors: tensors alternate between two shards.
  const auto bytes = repack_test::read_bytes(one / "model.safetensors");
  uint64_t hlen = 0;
  std::memcpy(&hlen, bytes.data(), 8);
  const auto header = nlohmann::json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(hlen)));
  nlohmann::json shard_header[2] = {nlohmann::json::object(), nlohmann::json::object()};
  std::string shard_data[2];
  nlohmann::json weight_map = nlohmann::json::object();
  int k = 0;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const int s = k++ % 2;
    const auto b = info["data_offsets"][0].get<uint64_t>(), e = info["data_offsets"][1].get<uint64_t>();
    nlohmann::json entry = info;
    entry["data_offsets"] = {shard_data[s].size(), shard_data[s].size() + (e - b)};
    shard_data[s].append(reinterpret_cast<const char*>(bytes.data()) + 8 + hlen + b, e - b);
    shard_header[s][name] = entry;
    weight_map[name] = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
  }
  for (int s = 0; s < 2; ++s) {
    std::string h = shard_header[s].dump();
    h.resize((h.size() + 7) / 8 * 8, ' ');
    const uint64_t n = h.size();
    std::string file(reinterpret_cast<const char*>(&n), 8);
    file += h + shard_data[s];
    repack_test::write_bytes(dir / ("model-0000" + std::to_string(s + 1) + "-of-00002.safetensors"), file.data(), file.size());
  }
  const std::string index = nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump();
  repack_test::write_bytes(dir / "model.safetensors.index.json", index.data(), index.size());

  auto a = run_repack(one, tmp / "a.memra");
  auto b = run_repack(dir, tmp / "b.memra");
  ASSERT_TRUE(a.ok()) << a.error().message;
  ASSERT_TRUE(b.ok()) << b.error().message;
  ASSERT_EQ(a->manifest.tensors.size(), b->manifest.tensors.size());
  std::map<std::string, std::string> crc_a;
  for (const auto& t : a->manifest.tensors) crc_a[t.name] = t.checksum;
  for (const auto& t : b->manifest.tensors) EXPECT_EQ(crc_a[t.name], t.checksum) << t.name;
  std::string listing;
  for (int s = 1; s <= 2; ++s) {
    const std::string name = "model-0000" + std::to_string(s) + "-of-00002.safetensors";
    listing += repack_test::sha256_file(dir / name) + "  " + name + "\n";
  }
  EXPECT_EQ(b->manifest.source.sha256, format::sha256_hex(listing.data(), listing.size()));
  EXPECT_EQ(b->manifest.source.size, fs::file_size(dir / "model-00001-of-00002.safetensors") + fs::file_size(dir / "model-00002-of-00002.safetensors"));
  EXPECT_TRUE(fs::exists(tmp / "b.memra/source/model.safetensors.index.json"));
}

TEST(MemraRepack, DigestOfShardedSourcesIsTheSortedListingsSha) {
  const std::vector<format::SourceFile> files = {{"b.safetensors", 1, std::string(64, '2')}, {"a.safetensors", 1, std::string(64, '1')}};
  const std::string listing = std::string(64, '1') + "  a.safetensors\n" + std::string(64, '2') + "  b.safetensors\n";
  EXPECT_EQ(repack::combined_digest(files), format::sha256_hex(listing.data(), listing.size()));
  EXPECT_EQ(repack::combined_digest({files[0]}), files[0].sha256);
}

// Rows that break a scheme's block: the llama model plus two extra bf16 matrices, one of
// 96 columns (a multiple of q4_0's 32, not of iq4_xs's 256) and one of 40 (neither).
// Under --quant they fall back as documented; forced onto the scheme with
// --tensor-scheme, the repack is refused naming the tensor, with nothing written.
TEST(MemraRepack, RowsThatBreakTheBlockFallBackOrAreRefusedByName) {
  MEMRA_REQUIRE_FIXTURES();
  const fs::path one = memra::testing::fixture("models/llama");
  TempDir tmp;
  const fs::path dir = tmp / "odd";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}) fs::copy_file(one / f, dir / f);
  const auto bytes = repack_test::read_bytes(one / "model.safetensors");
  uint64_t hlen = 0;
  std::memcpy(&hlen, bytes.data(), 8);
  auto header = nlohmann::json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(hlen)));
  std::string data(reinterpret_cast<const char*>(bytes.data()) + 8 + hlen, bytes.size() - 8 - hlen);
  for (const auto& [name, rows, cols] : {std::tuple<const char*, uint64_t, uint64_t>{"model.extra96.weight", 4, 96}, {"model.extra40.weight", 2, 40}}) {
    const uint64_t begin = data.size();
    for (uint64_t i = 0; i < rows * cols; ++i) {
      const uint16_t h = quant::f32_to_bf16(0.01f * static_cast<float>(static_cast<int>(i % 17) - 8));
      data.append(reinterpret_cast<const char*>(&h), 2);
    }
    header[name] = {{"dtype", "BF16"}, {"shape", {rows, cols}}, {"data_offsets", {begin, data.size()}}};
  }
  std::string h = header.dump();
  h.resize((h.size() + 7) / 8 * 8, ' ');
  const uint64_t n = h.size();
  std::string file(reinterpret_cast<const char*>(&n), 8);
  file += h + data;
  repack_test::write_bytes(dir / "model.safetensors", file.data(), file.size());

  for (const std::string quant : {"q4_0", "iq4_xs"}) {
    auto r = run_repack(dir, tmp / (quant + ".memra"), quant);
    ASSERT_TRUE(r.ok()) << quant << ": " << r.error().message;
    auto m = format::MemraModel::open(tmp / (quant + ".memra"), {true, 2});
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_EQ(m->find("model.extra96.weight")->entry->scheme, quant == "q4_0" ? "q4_0" : "q8_0");
    EXPECT_EQ(m->find("model.extra40.weight")->entry->scheme, "bf16");
    EXPECT_EQ(m->find("blk.0.ffn_up.weight")->entry->scheme, quant);
  }
  for (const auto& [tensor, scheme] : {std::pair<std::string, std::string>{"model.extra96.weight", "iq4_xs"}, {"model.extra40.weight", "q4_0"}}) {
    repack::RepackOptions o;
    o.plugins = &memra::testing::build_plugins();
    o.source = dir;
    o.output = tmp / "refused.memra";
    o.quant = scheme;
    o.overrides = {{tensor, scheme}};
    auto r = repack::repack_checkpoint(o);
    ASSERT_FALSE(r.ok()) << tensor;
    EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
    const std::string cols = tensor == "model.extra96.weight" ? "96 columns, iq4_xs needs a multiple of 256" : "40 columns, q4_0 needs a multiple of 32";
    EXPECT_NE(r.error().message.find("tensor '" + tensor + "' (bf16) cannot be written as " + scheme + ": its rows have " + cols),
              std::string::npos)
        << r.error().message;
    EXPECT_FALSE(fs::exists(o.output));
    std::cout << "[ " << scheme << " ] " << r.error().message << "\n";
  }
}

}  // namespace
