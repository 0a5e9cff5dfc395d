// Mixture-of-experts checkpoints in both forms moe_ffn v2 takes them from (tests/support/
// backends.hpp: the CPU reference everywhere, CUDA where it can run):
//  - llama.cpp's GGUF: the qwen3_moe fixture (../shared/fixtures/models/qwen3_moe, transformers
//    5.17, one tensor per expert) written as llama.cpp's converter writes a Qwen3-MoE checkpoint
//    (conversion/qwen.py Qwen2MoeModel.modify_tensors: the experts of a layer torch.stack'ed into
//    ffn_{gate,up,down}_exps [E][rows][cols]; conversion/base.py: the router ffn_gate_inp and
//    the norms float32, the other matrices in the outtype), by tests/repack's GgufWriter from
//    the checkpoint's exact values, and read in place (stacked, no per-expert copies);
//  - the Hugging Face checkpoint, its per-expert tensors stacked by the family's tensor_parts.
// Oracles: transformers' float32 reference (the fixture's reference logits, within the bounds
// of fixture_model_test.cpp), and each form bitwise the other where both hold the same numbers.
// llama.cpp renormalises a qwen3moe file's top-k weights always; the fixture's checkpoint says
// norm_topk_prob false, so a file carrying expert_weights_norm false (the key llama.cpp's other
// MoE architectures read) is the fixture, and one without it (as the converter writes it) is
// read as llama.cpp reads it: renormalised, bitwise the checkpoint with norm_topk_prob true.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "host/engine/engine.hpp"
#include "repack/checkpoint/safetensors.hpp"
#include "repack/format/reader.hpp"
#include "repack/tool/repack.hpp"
#include "tests/repack/test_writers.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/build_plugins.hpp"
#include "tests/support/fixture_engine.hpp"
#include "tests/support/logits.hpp"
#include "tests/support/repacked_fixture.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using memra::engine::Engine;
using memra::engine::StepRequest;

namespace {

constexpr double kTransformersBound = 1e-4;  // the float32 path (fixture_model_test.cpp)
constexpr uint32_t kGgmlF32 = 0, kGgmlBf16 = 30;

// The fixture as llama.cpp's converter writes it, matrices in `type` (F32 or BF16: the
// checkpoint's bf16 bits as they are); `norm_key`: write qwen3moe.expert_weights_norm with
// this value (-1: leave it out, as the converter does); `short_gate`: blk.0.ffn_gate_exps stacks
// one expert fewer than the file says it has (a malformed file); `fuse`: gate and up as one
// ffn_gate_up_exps [E][2 * width][hidden] per layer (the converter's --fuse-gate-up-exps:
// torch.cat([gate, up], dim=1)).
fs::path qwen3_moe_gguf(const fs::path& dir, const fs::path& out, uint32_t type, int norm_key, bool short_gate = false, bool fuse = false) {
  auto ck = memra::safetensors::Checkpoint::open(dir.string());
  EXPECT_TRUE(ck.ok());
  if (!ck.ok()) return {};
  const nlohmann::json c = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  memra::testing::GgufWriter w;
  const std::string a = "qwen3moe.";
  w.kv_str("general.architecture", "qwen3moe");
  w.kv_u32(a + "context_length", c["max_position_embeddings"].get<uint32_t>());
  w.kv_u32(a + "embedding_length", c["hidden_size"].get<uint32_t>());
  w.kv_u32(a + "block_count", c["num_hidden_layers"].get<uint32_t>());
  w.kv_u32(a + "feed_forward_length", c["intermediate_size"].get<uint32_t>());
  w.kv_u32(a + "attention.head_count", c["num_attention_heads"].get<uint32_t>());
  w.kv_u32(a + "attention.head_count_kv", c["num_key_value_heads"].get<uint32_t>());
  w.kv_u32(a + "attention.key_length", c["head_dim"].get<uint32_t>());
  w.kv_u32(a + "attention.value_length", c["head_dim"].get<uint32_t>());
  w.kv_f32(a + "attention.layer_norm_rms_epsilon", c["rms_norm_eps"].get<float>());
  w.kv_f32(a + "rope.freq_base", c["rope_parameters"]["rope_theta"].get<float>());
  w.kv_u32(a + "expert_count", c["num_local_experts"].get<uint32_t>());
  w.kv_u32(a + "expert_used_count", c["num_experts_per_tok"].get<uint32_t>());
  w.kv_u32(a + "expert_feed_forward_length", c["moe_intermediate_size"].get<uint32_t>());
  if (norm_key >= 0) w.kv_bool(a + "expert_weights_norm", norm_key != 0);
  w.kv_u32("tokenizer.ggml.eos_token_id", c["eos_token_id"].get<uint32_t>());
  w.kv_u32("tokenizer.ggml.padding_token_id", c["pad_token_id"].get<uint32_t>());
  const std::pair<std::string, std::string> names[] = {
      {"input_layernorm.weight", "attn_norm.weight"},    {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"}, {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"}};
  const auto bytes_of = [&](const memra::safetensors::TensorView& t, bool f32) {
    std::vector<uint8_t> b;
    if (!f32 && t.dtype == memra::safetensors::Dtype::BF16) return std::vector<uint8_t>(t.data, t.data + t.nbytes);
    auto v = memra::safetensors::to_f32(t);
    EXPECT_TRUE(v.ok());
    if (v.ok()) b.assign(reinterpret_cast<const uint8_t*>(v->data()), reinterpret_cast<const uint8_t*>(v->data() + v->size()));
    return b;
  };
  std::map<std::string, std::vector<const memra::safetensors::TensorView*>> experts;  // "blk.L.ffn_gate_exps" -> per expert
  for (const auto& t : ck->tensors()) {
    std::string name;
    const std::string pre = "model.layers.";
    const size_t dot = t.name.find('.', pre.size());
    const std::string layer = t.name.rfind(pre, 0) == 0 ? t.name.substr(pre.size(), dot - pre.size()) : "";
    const std::string rest = layer.empty() ? "" : t.name.substr(dot + 1);
    if (t.name == "model.embed_tokens.weight") name = "token_embd.weight";
    else if (t.name == "model.norm.weight") name = "output_norm.weight";
    else if (t.name == "lm_head.weight") name = "output.weight";
    for (const auto& [hf, gguf] : names)
      if (rest == hf) name = "blk." + layer + "." + gguf;
    if (rest.rfind("mlp.experts.", 0) == 0) {  // mlp.experts.E.{gate,up,down}_proj.weight
      const std::string e = rest.substr(12, rest.find('.', 12) - 12), kind = rest.substr(13 + e.size());
      const std::string canon = kind == "gate_proj.weight" ? "ffn_gate_exps" : kind == "up_proj.weight" ? "ffn_up_exps" : "ffn_down_exps";
      auto& v = experts["blk." + layer + "." + canon + ".weight"];
      v.resize(std::max<size_t>(v.size(), std::stoul(e) + 1));
      v[std::stoul(e)] = &t;
      continue;
    }
    EXPECT_FALSE(name.empty()) << t.name;
    if (name.empty()) return {};
    const bool f32 = type == kGgmlF32 || t.shape.size() == 1 || name.ends_with("ffn_gate_inp.weight");
    w.tensor(name, std::vector<uint64_t>(t.shape.rbegin(), t.shape.rend()), f32 ? kGgmlF32 : type, bytes_of(t, f32));
  }
  if (fuse)
    for (const std::string layer : {"0", "1"}) {
      const auto& gate = experts["blk." + layer + ".ffn_gate_exps.weight"];
      const auto& up = experts["blk." + layer + ".ffn_up_exps.weight"];
      std::vector<uint8_t> data;
      for (size_t e = 0; e < gate.size(); ++e)
        for (const auto* t : {gate[e], up[e]}) {
          const auto b = bytes_of(*t, type == kGgmlF32);
          data.insert(data.end(), b.begin(), b.end());
        }
      const auto& s = gate[0]->shape;
      w.tensor("blk." + layer + ".ffn_gate_up_exps.weight", {s[1], 2 * s[0], gate.size()}, type, std::move(data));
      experts.erase("blk." + layer + ".ffn_gate_exps.weight");
      experts.erase("blk." + layer + ".ffn_up_exps.weight");
    }
  for (const auto& [name, per_expert] : experts) {  // torch.stack(datas, dim=0)
    std::vector<uint8_t> data;
    const size_t count = short_gate && name == "blk.0.ffn_gate_exps.weight" ? per_expert.size() - 1 : per_expert.size();
    for (size_t i = 0; i < count; ++i) {
      const auto* t = per_expert[i];
      EXPECT_NE(t, nullptr) << name;
      if (!t) return {};
      const auto b = bytes_of(*t, type == kGgmlF32);
      data.insert(data.end(), b.begin(), b.end());
    }
    const auto& s = per_expert[0]->shape;
    w.tensor(name, {s[1], s[0], count}, type, std::move(data));
  }
  const std::vector<uint8_t> file = w.finish();
  std::ofstream(out, std::ios::binary).write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  return out;
}

// `from` (one safetensors file) rewritten without tensor `drop`.
void write_safetensors_without(const fs::path& from, const fs::path& to, const std::string& drop) {
  auto ck = memra::safetensors::Checkpoint::open(from.parent_path().string());
  ASSERT_TRUE(ck.ok());
  nlohmann::ordered_json header;
  std::vector<uint8_t> data;
  for (const auto& t : ck->tensors()) {
    if (t.name == drop) continue;
    header[t.name] = {{"dtype", memra::safetensors::dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.nbytes}}};
    data.insert(data.end(), t.data, t.data + t.nbytes);
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::ofstream out(to, std::ios::binary);
  const uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

std::unique_ptr<Engine> load(const fs::path& path, memra_backend_kind kind, memra_dtype kv) {
  memra::engine::EngineOptions eo = memra::testing::engine_options(kind);
  eo.kv_dtype = kv;
  eo.max_context = 512;
  return memra::testing::open_engine(path, eo);
}

// The prompt's logits at every position, then `steps` greedy decode steps' logits.
std::vector<std::vector<float>> rows_of(const fs::path& path, memra_backend_kind kind, memra_dtype kv, const std::vector<int32_t>& prompt,
                                        int steps, std::string* config = nullptr) {
  std::vector<std::vector<float>> rows;
  auto e = load(path, kind, kv);
  EXPECT_TRUE(e) << path;
  if (!e) return rows;
  if (config) *config = e->source().config.family_json;
  const int32_t seq = e->open_sequence();
  StepRequest r{seq, prompt, true, true};
  auto out = e->step({&r, 1});
  EXPECT_TRUE(out.ok()) << out.error().message;
  if (!out.ok()) return rows;
  rows = *out;
  for (int s = 0; s < steps; ++s) {
    const int32_t next = memra::engine::argmax(rows.back());
    StepRequest d{seq, {&next, 1}, false};
    auto o = e->step({&d, 1});
    EXPECT_TRUE(o.ok()) << o.error().message;
    if (!o.ok()) return rows;
    rows.push_back((*o)[0]);
  }
  return rows;
}

double worst_against(const std::vector<std::vector<float>>& rows, const memra::testing::TransformersReference& ref) {
  double worst = 0;
  for (size_t i = 0; i < ref.input_ids.size() && i < rows.size(); ++i)
    worst = std::max(worst, memra::testing::max_rel_diff(rows[i], ref.prefill.data() + i * ref.vocab, ref.vocab));
  return worst;
}

using MoeGguf = memra::testing::BackendTest;

// The float32 GGUF (expert_weights_norm false) against transformers, and bitwise the
// Hugging Face checkpoint repacked to f32 (its per-expert tensors stacked by the family) and
// the GGUF with gate and up fused (ffn_gate_up_exps, split by the family).
TEST_P(MoeGguf, Qwen3MoeStackedF32MatchesTransformersAndTheStackedCheckpoint) {
  const fs::path dir = memra::testing::fixture("models/qwen3_moe");
  if (!memra::testing::has_reference(dir)) GTEST_SKIP() << "fixture " << dir << " absent (expects ../shared/fixtures)";
  const auto ref = memra::testing::read_reference(dir);
  memra::testing::TempDir tmp("memra-moe-gguf");
  const fs::path gguf = qwen3_moe_gguf(dir, tmp.path() / "qwen3_moe-F32.gguf", kGgmlF32, 0);
  ASSERT_FALSE(gguf.empty());
  std::string config;
  const auto got = rows_of(gguf, GetParam(), MEMRA_DTYPE_F32, ref.input_ids, 8, &config);
  ASSERT_EQ(got.size(), ref.input_ids.size() + 8);
  EXPECT_EQ(nlohmann::json::parse(config).value("norm_topk_prob", true), false);
  const double worst = worst_against(got, ref);
  std::cout << "[ qwen3_moe GGUF f32 on " << memra::testing::backend_name(GetParam()) << " ] prefill max rel diff vs transformers " << worst << "\n";
  EXPECT_LE(worst, kTransformersBound);
  for (size_t s = 0; s < 8; ++s)
    EXPECT_LE(memra::testing::max_rel_diff(got[ref.input_ids.size() + s], ref.steps.data() + (s + 1) * ref.vocab, ref.vocab), kTransformersBound)
        << "decode step " << s;
  const fs::path f32 = memra::testing::repacked_fixture(dir, "f32");
  ASSERT_FALSE(f32.empty());
  const auto want = rows_of(f32, GetParam(), MEMRA_DTYPE_F32, ref.input_ids, 8);
  EXPECT_EQ(memra::testing::rows_differing(want, got), "") << "the GGUF's stacked experts differ from the checkpoint's stacked ones";
  // The converter's --fuse-gate-up-exps form (ffn_gate_up_exps, split by the family's parts).
  const fs::path fused = qwen3_moe_gguf(dir, tmp.path() / "qwen3_moe-fused-F32.gguf", kGgmlF32, 0, false, true);
  ASSERT_FALSE(fused.empty());
  EXPECT_EQ(memra::testing::rows_differing(want, rows_of(fused, GetParam(), MEMRA_DTYPE_F32, ref.input_ids, 8)), "")
      << "the fused gate_up experts differ from the separate ones";
}

// The BF16 GGUF as the converter writes it (matrices bf16, the router and norms f32), with
// expert_weights_norm false: transformers within the bf16-activation bound. Without the key
// (what the converter writes) the top-k weights are renormalised, as llama.cpp reads the
// file: every row moves.
TEST_P(MoeGguf, Qwen3MoeStackedBf16AsTheConverterWritesIt) {
  const fs::path dir = memra::testing::fixture("models/qwen3_moe");
  if (!memra::testing::has_reference(dir)) GTEST_SKIP() << "fixture " << dir << " absent (expects ../shared/fixtures)";
  const auto ref = memra::testing::read_reference(dir);
  memra::testing::TempDir tmp("memra-moe-gguf");
  const fs::path keyed = qwen3_moe_gguf(dir, tmp.path() / "keyed-BF16.gguf", kGgmlBf16, 0);
  const fs::path plain = qwen3_moe_gguf(dir, tmp.path() / "qwen3_moe-BF16.gguf", kGgmlBf16, -1);
  ASSERT_FALSE(keyed.empty());
  ASSERT_FALSE(plain.empty());
  const auto got = rows_of(keyed, GetParam(), memra::engine::kDefaultKvDtype, ref.input_ids, 0);
  ASSERT_EQ(got.size(), ref.input_ids.size());
  const double worst = worst_against(got, ref);
  std::cout << "[ qwen3_moe GGUF bf16 on " << memra::testing::backend_name(GetParam()) << " ] prefill max rel diff vs transformers " << worst << "\n";
  EXPECT_LE(worst, memra::testing::kBf16ActivationBound);
  std::string config;
  const auto renormalised = rows_of(plain, GetParam(), memra::engine::kDefaultKvDtype, ref.input_ids, 0, &config);
  ASSERT_EQ(renormalised.size(), got.size());
  const auto j = nlohmann::json::parse(config);
  EXPECT_EQ(j.value("norm_topk_prob", false), true);
  EXPECT_NE(j.value("norm_topk_prob_from", "").find("llama.cpp"), std::string::npos) << config;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FALSE(memra::testing::bitwise_equal(got[i], renormalised[i])) << "row " << i;
}

// memra-repack writes the stacked experts in every scheme as [E][rows][cols] tensors (E * rows
// rows of cols), from every form: the GGUF's stacked tensors, the checkpoint's per-expert ones
// and the GGUF's fused gate_up give byte-identical .memra experts (the same float32 values, quantised row by row), and
// the repacked GGUF loads to the GGUF's own logits (f32: bitwise).
TEST_P(MoeGguf, Qwen3MoeStackedExpertsRepackInEveryScheme) {
  if (GetParam() != MEMRA_BACKEND_CPU) GTEST_SKIP() << "a repack property; the CPU instance runs it";
  const fs::path dir = memra::testing::fixture("models/qwen3_moe");
  if (!memra::testing::has_reference(dir)) GTEST_SKIP() << "fixture " << dir << " absent (expects ../shared/fixtures)";
  memra::testing::TempDir tmp("memra-moe-gguf");
  const fs::path gguf = qwen3_moe_gguf(dir, tmp.path() / "qwen3_moe-F32.gguf", kGgmlF32, 0);
  const fs::path fused = qwen3_moe_gguf(dir, tmp.path() / "qwen3_moe-fused-F32.gguf", kGgmlF32, 0, false, true);
  ASSERT_FALSE(gguf.empty());
  ASSERT_FALSE(fused.empty());
  for (const std::string quant : {"f32", "bf16", "q8_0", "q4_k", "q6_k", "q4_0", "iq4_xs", "fp8"}) {
    SCOPED_TRACE(quant);
    std::map<std::string, std::vector<uint8_t>> exps[3];
    std::string schemes[3];
    int i = 0;
    for (const fs::path& src : {gguf, dir, fused}) {
      memra::repack::RepackOptions o;
      o.plugins = &memra::testing::build_plugins();
      o.source = src;
      o.output = tmp.path() / (quant + "-" + std::to_string(i) + ".memra");
      if (quant == "f32" || quant == "bf16") o.overrides = {{"*", quant}};
      else o.quant = quant;
      o.threads = 2;
      auto r = memra::repack::repack_checkpoint(o);
      ASSERT_TRUE(r.ok()) << src << ": " << r.error().message;
      auto m = memra::format::MemraModel::open(o.output);
      ASSERT_TRUE(m.ok()) << m.error().message;
      for (const memra::format::Tensor& t : m->tensors())
        if (t.entry->name.find("_exps.weight") != std::string::npos) {
          ASSERT_EQ(t.entry->shape.size(), 3u) << t.entry->name;
          EXPECT_EQ(t.entry->shape[0], 8u) << t.entry->name;
          exps[i][t.entry->name].assign(t.data, t.data + t.entry->bytes);
          schemes[i] = t.entry->scheme;
        }
      ++i;
    }
    EXPECT_EQ(exps[0].size(), 6u);  // 2 layers x gate, up, down
    EXPECT_NE(schemes[0], "");
    for (int other : {1, 2}) {
      EXPECT_EQ(schemes[0], schemes[other]);
      for (const auto& [name, bytes] : exps[0]) {
        ASSERT_TRUE(exps[other].count(name)) << name;
        EXPECT_TRUE(bytes == exps[other][name]) << name << " (" << schemes[0] << ") differs between the GGUF's and the "
                                                << (other == 1 ? "checkpoint's" : "fused GGUF's") << " repack";
      }
    }
    if (quant == "f32") {
      const auto prompt = memra::testing::reference_prompt(dir);
      EXPECT_EQ(memra::testing::rows_differing(rows_of(gguf, GetParam(), MEMRA_DTYPE_F32, prompt, 4),
                                               rows_of(tmp.path() / "f32-0.memra", GetParam(), MEMRA_DTYPE_F32, prompt, 4)),
                "");
    }
  }
}

// A stacked tensor whose expert count disagrees with the config is refused at load, naming it:
// a GGUF whose blk.0.ffn_gate_exps holds 7 of its 8 experts, a checkpoint whose config says 4
// experts where it stores 8 (the router, checked first, is named there), and a checkpoint that
// lacks one expert's matrix (the stacked tensor and the missing slice named).
TEST_P(MoeGguf, StackedExpertsOfAnotherCountAreRefusedNamingTheTensor) {
  if (GetParam() != MEMRA_BACKEND_CPU) GTEST_SKIP() << "a load-time check; the CPU instance runs it";
  const fs::path dir = memra::testing::fixture("models/qwen3_moe");
  if (!memra::testing::has_reference(dir)) GTEST_SKIP() << "fixture " << dir << " absent (expects ../shared/fixtures)";
  memra::testing::TempDir tmp("memra-moe-gguf");
  auto refused = [&](const fs::path& path) {
    memra::engine::EngineOptions eo = memra::testing::engine_options(GetParam());
    eo.max_context = 64;
    auto src = memra::engine::open_model_source(path.string(), memra::testing::build_plugins());
    if (!src) return src.error().message;
    auto e = Engine::create(std::move(*src), memra::testing::build_plugins(), eo);
    return e.ok() ? std::string() : e.error().message;
  };
  const fs::path gguf = qwen3_moe_gguf(dir, tmp.path() / "short.gguf", kGgmlF32, 0, true);
  ASSERT_FALSE(gguf.empty());
  const std::string why = refused(gguf);
  EXPECT_NE(why.find("tensor 'blk.0.ffn_gate_exps.weight' has shape [7, 256, 256], which does not match the config's [8, 256, 256]"),
            std::string::npos)
      << why;
  std::cout << "[ 7 of 8 experts stacked ] " << why << "\n";
  fs::create_directories(tmp.path() / "m");
  for (const char* f : {"model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    fs::copy_file(dir / f, tmp.path() / "m" / f);
  nlohmann::json c = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  c["num_local_experts"] = 4;
  std::ofstream(tmp.path() / "m" / "config.json") << c.dump();
  const std::string four = refused(tmp.path() / "m");
  EXPECT_NE(four.find("tensor 'blk.0.ffn_gate_inp.weight' has shape [8, 256], which does not match the config's [4, 256]"), std::string::npos)
      << four;
  // The checkpoint without one expert's gate (layer 0, expert 3): the stacked tensor lacks a slice.
  fs::create_directories(tmp.path() / "h");
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    fs::copy_file(dir / f, tmp.path() / "h" / f);
  write_safetensors_without(dir / "model.safetensors", tmp.path() / "h" / "model.safetensors", "model.layers.0.mlp.experts.3.gate_proj.weight");
  const std::string hole = refused(tmp.path() / "h");
  EXPECT_NE(hole.find("tensor 'blk.0.ffn_gate_exps.weight' stacks 7 checkpoint tensors, but slice 3 is missing"), std::string::npos) << hole;
  std::cout << "[ expert 3's gate missing ] " << hole << "\n";
  // memra-repack refuses it before writing, naming the user's tensor.
  memra::repack::RepackOptions o;
  o.plugins = &memra::testing::build_plugins();
  o.source = gguf;
  o.output = tmp.path() / "short.memra";
  auto r = memra::repack::repack_checkpoint(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("blk.0.ffn_gate_exps.weight"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(o.output));
  std::cout << "[ repack of 7 of 8 experts ] " << r.error().message << "\n";
}

MEMRA_INSTANTIATE_BACKENDS(MoeGguf);

}  // namespace
