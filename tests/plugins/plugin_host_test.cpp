// PluginHost against the test plugins in MEMRA_TEST_PLUGIN_DIR: every broken plugin
// is refused with one line naming the file and the reason, the good ones load, are
// selectable by score, report errors through the host, and stay loaded while any
// object from them lives.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <optional>
#include <vector>

#include "core/plugin_host/plugin_host.hpp"
#include "tests/plugins/test_support.hpp"

namespace memra::plugins {
namespace {

namespace fs = std::filesystem;
using test::LogCapture;
using test::test_plugin;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class PluginsHost : public ::testing::Test {
 protected:
  LogCapture log;
  std::unique_ptr<PluginHost> host;

  void discover_all() {
    PluginHostOptions o = test::isolated_options(log, {test::test_plugin_dir()});
    o.services.config = [](std::string_view key) -> std::optional<std::string> {
      if (key == "good.greeting") return std::string("hello world");
      return std::nullopt;
    };
    host = std::make_unique<PluginHost>(std::move(o));
    host->discover();
  }

  std::map<std::string, std::string> refusals_by_file() const {
    std::map<std::string, std::string> out;
    for (const Refusal& r : host->refusals()) out[r.file.filename().string()] = r.reason;
    return out;
  }
};

TEST_F(PluginsHost, RefusesEachBrokenPluginWithOneLineNamingFileAndReason) {
  discover_all();
  const std::string dup_a = test_plugin("memra-quant-dup-a").string();
  const std::string small = std::to_string(offsetof(memra_plugin_descriptor, score));
  // file -> the reason's expected beginning (or the whole reason).
  const std::map<std::string, std::string> expected = {
      {"libmemra-quant-abi1.so", "ABI major 1, host supports 2 (rebuild the plugin against memra SDK 2.x)"},
      {"libmemra-quant-abi3.so", "ABI major 3, host supports 2 (rebuild the plugin against memra SDK 2.x)"},
      {"libmemra-quant-smalldesc.so", "descriptor struct_size " + small + " is smaller than the v2.0 descriptor (" +
                                          std::to_string(MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE) + " bytes)"},
      {"libmemra-quant-noinit.so", "does not export memra_plugin_init"},
      {"libmemra-quant-noquery.so", "does not export memra_plugin_query"},
      {"libmemra-quant-initfail.so",
       "memra_plugin_init failed (UNSUPPORTED): initfail: needs AVX-512 VNNI, which this CPU lacks"},
      {"libmemra-quant-initthrow.so", "memra_plugin_init threw a C++ exception (init exploded)"},
      {"libmemra-quant-querythrow.so", "memra_plugin_query threw a C++ exception (query exploded)"},
      {"libmemra-quant-dup-b.so", "duplicate plugin name 'dup-quant' (already registered from " + dup_a},
      {"libmemra-family-wrongkind.so", "descriptor kind is quant but the file name says family"},
      {"libmemra-quant-notable.so", "memra_plugin_init returned no quant table"},
      {"libmemra-quant-garbage.so", "cannot load the library: "},
      {"libmemra-family-badattrs.so",
       "op 'badattrs.mix' v1: bad attribute struct: attrs_size 0 cannot hold its struct_size (every attribute struct begins "
       "with size_t struct_size)"},
      {"libmemra-family-badopname.so", "op 0 'other.mix': an op's name is 'badopname.<op>' (the plugin's name, a dot, the op's)"},
      {"libmemra-quant-smalltable.so", "quant table struct_size " + std::to_string(offsetof(memra_quant_api, matmul)) +
                                           " is smaller than v2.0 (" +
                                           std::to_string(MEMRA_STRUCT_SIZE(memra_quant_api, matmul)) + " bytes)"},
  };
  std::map<std::string, std::string> got = refusals_by_file();
  ASSERT_EQ(got.size(), expected.size()) << "refusals: " << ::testing::PrintToString(got);
  for (const auto& [file, reason_start] : expected) {
    SCOPED_TRACE(file);
    ASSERT_TRUE(got.contains(file));
    const std::string& reason = got[file];
    EXPECT_THAT(reason, StartsWith(reason_start));
    EXPECT_EQ(reason.find('\n'), std::string::npos);
    // Exactly one log line mentions the file, and it is the refusal line.
    const std::string full = (test::test_plugin_dir() / file).string();
    std::vector<std::string> lines = log.containing(full + ":");
    ASSERT_EQ(lines.size(), 1u) << ::testing::PrintToString(log.lines());
    EXPECT_EQ(lines[0], "plugin refused: " + full + ": " + reason);
  }
  // A file not named like a plugin is ignored, not refused.
  EXPECT_TRUE(log.containing("libother-quant-x.so").empty());

  std::vector<std::string> names;
  for (const PluginInfo& p : host->plugins()) names.push_back(p.name);
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("good-family", "good-quant", "dup-quant", "v20-quant", "goodop"));
}

TEST_F(PluginsHost, AFamilysOwnOpsComeWithIt) {
  discover_all();
  auto with = host->family("goodop");
  ASSERT_TRUE(with.ok()) << with.error().message;
  ASSERT_EQ(with->ops().size(), 1u);
  EXPECT_STREQ(with->ops()[0].name, "goodop.mix");
  EXPECT_EQ(with->ops()[0].attrs_size, 16u);
  auto without = host->family("good-family");
  ASSERT_TRUE(without.ok());
  EXPECT_TRUE(without->ops().empty());
}

TEST_F(PluginsHost, GarbageFileReasonCarriesTheLoaderError) {
  discover_all();
  std::string reason = refusals_by_file()["libmemra-quant-garbage.so"];
  // dlopen's own text ("file too short" / "invalid ELF header"), not a generic errno.
  EXPECT_TRUE(reason.find("too short") != std::string::npos || reason.find("ELF") != std::string::npos) << reason;
}

TEST_F(PluginsHost, RegisteredPluginsCarryTheirDescriptor) {
  discover_all();
  auto family = host->family("good-family");
  ASSERT_TRUE(family.ok()) << family.error().message;
  EXPECT_EQ(family->info().version, "0.2.0");
  EXPECT_EQ(family->info().kind, PluginKind::family);
  EXPECT_EQ(family->info().file, test_plugin("memra-family-good"));
  EXPECT_THAT(family->info().handles, ::testing::ElementsAre("GoodForCausalLM"));
  auto quant = host->quant("good-quant");
  ASSERT_TRUE(quant.ok());
  EXPECT_THAT(quant->info().handles, ::testing::ElementsAre("good_q", "shared_q"));
  EXPECT_FALSE(host->quant("good-family").ok());  // wrong kind
  EXPECT_EQ(log.containing("plugin loaded: good-quant 0.1.0 (quant: good_q, shared_q) from").size(), 1u);
}

// A plugin built against SDK 2.0 hands over the 2.0 table: it loads and serves, and the
// slots later minors appended (register_kernels) are never read from it.
TEST_F(PluginsHost, ATableOfAnEarlierMinorLoads) {
  discover_all();
  auto q = host->quant_for("v20_q", host->device_info());
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q->info().name, "v20-quant");
  auto bytes = q->weight_bytes("v20_q", 2, 3);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  EXPECT_EQ(*bytes, 24u);
}

TEST_F(PluginsHost, SelectsTheHighestScoreForTheDevice) {
  discover_all();
  const memra_device_info& cpu = host->device_info();
  const memra_device_info gpu = test::fake_gpu_device();

  // shared_q: good-quant scores 10 on the CPU and -1 elsewhere; dup-quant scores 5 everywhere.
  auto on_cpu = host->quant_for("shared_q", cpu);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.error().message;
  EXPECT_EQ(on_cpu->info().name, "good-quant");
  EXPECT_EQ(on_cpu->score(cpu, "shared_q"), 10);
  auto on_gpu = host->quant_for("shared_q", gpu);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.error().message;
  EXPECT_EQ(on_gpu->info().name, "dup-quant");

  // good_q only has good-quant, which cannot run on the GPU.
  auto none = host->quant_for("good_q", gpu);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::unsupported);
  EXPECT_THAT(none.error().message, HasSubstr("good-quant (score -1)"));
  EXPECT_THAT(none.error().message, HasSubstr("sm_90a"));

  auto unknown = host->quant_for("q9_z", cpu);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::not_found);
  EXPECT_THAT(unknown.error().message, HasSubstr("no quant plugin handles quant scheme 'q9_z'"));

  // A NULL score function scores 0, which can run.
  auto family = host->family_for("GoodForCausalLM", gpu);
  ASSERT_TRUE(family.ok()) << family.error().message;
  EXPECT_EQ(family->info().name, "good-family");
  EXPECT_EQ(family->score(gpu, "GoodForCausalLM"), 0);
  // Kinds are separate namespaces.
  EXPECT_FALSE(host->family_for("shared_q", cpu).ok());
}

TEST_F(PluginsHost, QuantCallsReachThePlugin) {
  discover_all();
  auto q = host->quant_for("good_q", host->device_info());
  ASSERT_TRUE(q.ok());
  const int64_t rows = 3, cols = 5, m = 2;
  std::vector<float> w(rows * cols), x(m * cols);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * float(i) - 1.0f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f - 0.125f * float(i);

  auto bytes = q->weight_bytes("good_q", rows, cols);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  ASSERT_EQ(*bytes, uint64_t(rows * cols * 4));
  std::vector<std::byte> packed(*bytes);
  ASSERT_TRUE(q->quantize("good_q", w, rows, cols, packed).ok());
  std::vector<float> back(rows * cols);
  ASSERT_TRUE(q->dequantize("good_q", packed, rows, cols, back).ok());
  EXPECT_EQ(back, w);

  std::vector<float> y(m * rows, -99.0f);
  memra_matmul_args args{};
  args.struct_size = MEMRA_MATMUL_ARGS_STRUCT_SIZE;
  args.scheme = "good_q";
  args.backend = MEMRA_BACKEND_CPU;
  args.weight = packed.data();
  args.rows = rows;
  args.cols = cols;
  args.m = m;
  args.x = x.data();
  args.y = y.data();
  ASSERT_TRUE(q->matmul(args).ok());
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double ref = 0;
      for (int64_t c = 0; c < cols; ++c) ref += double(x[t * cols + c]) * double(w[r * cols + c]);
      EXPECT_NEAR(y[t * rows + r], ref, 1e-5) << "t=" << t << " r=" << r;
    }
  }
  // The host checks shapes before calling the plugin.
  EXPECT_FALSE(q->dequantize("good_q", packed, rows, cols, std::span<float>(back).first(3)).ok());
}

TEST_F(PluginsHost, FailingCallCarriesThePluginsOwnMessage) {
  discover_all();
  auto family = host->family_for("GoodForCausalLM", host->device_info());
  ASSERT_TRUE(family.ok());
  const std::string reported = "good-family: architecture 'Unsupported' is not supported; expected GoodForCausalLM";
  auto plan = family->plan_create(R"({"architectures":["unsupported"]})");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code, ErrorCode::unsupported);
  EXPECT_EQ(family->last_error(), reported);
  EXPECT_EQ(plan.error().message, "plugin 'good-family': plan_create failed (UNSUPPORTED): " + reported);

  // The next successful call starts with a clean slate.
  auto ok_plan = family->plan_create(R"({"architectures":["GoodForCausalLM"]})");
  ASSERT_TRUE(ok_plan.ok()) << ok_plan.error().message;
  EXPECT_EQ(family->last_error(), "");

  auto q = host->quant("good-quant");
  ASSERT_TRUE(q.ok());
  auto bytes = q->weight_bytes("not_a_scheme", 1, 1);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(q->last_error(), "good-quant: unknown scheme");
}

TEST_F(PluginsHost, FamilyPlanModelAndForwardUseHostServices) {
  discover_all();
  // init read "good.greeting" through config_get (after a too-small probe) and logged it.
  EXPECT_EQ(log.containing("[good-family] greeting: hello world").size(), 1u);

  auto family = host->family_for("GoodForCausalLM", host->device_info());
  ASSERT_TRUE(family.ok());
  const std::string config = R"({"architectures":["GoodForCausalLM"]})";
  auto plan = family->plan_create(config);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  auto described = plan->describe();
  ASSERT_TRUE(described.ok()) << described.error().message;
  EXPECT_EQ(*described, R"({"plugin":"good-family","config_bytes":)" + std::to_string(config.size()) + "}");

  memra_weight_set weights{};
  weights.struct_size = MEMRA_WEIGHT_SET_STRUCT_SIZE;
  auto model = plan->create_model(weights, nullptr);
  ASSERT_TRUE(model.ok()) << model.error().message;

  std::vector<int32_t> tokens = {7, 3, 12}, positions = {0, 1, 2}, seq_index = {0, 0, 0}, seq_lens = {3};
  std::vector<int32_t> rows = {2, 0};
  std::vector<float> logits(rows.size() * 4, 0.0f);
  memra_forward_batch batch{};
  batch.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
  batch.num_tokens = 3;
  batch.token_ids = tokens.data();
  batch.positions = positions.data();
  batch.seq_index = seq_index.data();
  batch.num_seqs = 1;
  batch.seq_lens = seq_lens.data();
  batch.num_logits = 2;
  batch.logits_rows = rows.data();
  batch.logits = logits.data();
  ASSERT_TRUE(model->forward(batch).ok());
  EXPECT_EQ(logits, (std::vector<float>{120, 121, 122, 123, 70, 71, 72, 73}));

  batch.struct_size = 8;  // the plugin checks struct_size and reports it
  auto bad = model->forward(batch);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("model_forward: batch struct_size too small"));
}

TEST_F(PluginsHost, ObjectsKeepTheLibraryLoadedAfterTheHostIsGone) {
  const fs::path file = test_plugin("memra-family-good");
  ASSERT_FALSE(test::is_loaded(file));
  std::optional<ModelPlan> plan;
  {
    PluginHost h(test::isolated_options(log, {}));
    auto info = h.load(file);
    ASSERT_TRUE(info.ok()) << info.error().message;
    auto family = h.family_for("GoodForCausalLM", h.device_info());
    ASSERT_TRUE(family.ok());
    auto p = family->plan_create("{}");
    ASSERT_TRUE(p.ok());
    plan.emplace(std::move(*p));
  }  // the host and the family handle are gone; the plan is not
  EXPECT_TRUE(test::is_loaded(file));
  EXPECT_TRUE(log.containing("[good-family] shutdown").empty()) << "shutdown ran while a plan was alive";
  auto described = plan->describe();  // still callable
  EXPECT_TRUE(described.ok());

  plan.reset();  // plan_destroy, then shutdown, then dlclose
  EXPECT_EQ(log.containing("[good-family] shutdown").size(), 1u);
  EXPECT_FALSE(test::is_loaded(file));
}

TEST_F(PluginsHost, ModelKeepsItsPlanAndLibraryAlive) {
  const fs::path file = test_plugin("memra-family-good");
  std::optional<Model> model;
  {
    PluginHost h(test::isolated_options(log, {}));
    ASSERT_TRUE(h.load(file).ok());
    auto plan = h.family("good-family")->plan_create("{}");
    ASSERT_TRUE(plan.ok());
    memra_weight_set weights{};
    weights.struct_size = MEMRA_WEIGHT_SET_STRUCT_SIZE;
    auto m = plan->create_model(weights, nullptr);
    ASSERT_TRUE(m.ok());
    model.emplace(std::move(*m));
  }
  EXPECT_TRUE(test::is_loaded(file));
  model.reset();
  EXPECT_FALSE(test::is_loaded(file));
  // model_destroy freed its host buffer: no leak warning at unload.
  EXPECT_TRUE(log.containing("never passed to memory_free").empty());
  EXPECT_EQ(log.containing("[good-family] shutdown").size(), 1u);
}

TEST_F(PluginsHost, ShutdownRunsOnceAtHostDestructionWhenNothingIsAlive) {
  const fs::path file = test_plugin("memra-family-good");
  {
    PluginHost h(test::isolated_options(log, {}));
    ASSERT_TRUE(h.load(file).ok());
    EXPECT_TRUE(test::is_loaded(file));
    EXPECT_TRUE(log.containing("[good-family] shutdown").empty());
  }
  EXPECT_EQ(log.containing("[good-family] shutdown").size(), 1u);
  EXPECT_FALSE(test::is_loaded(file));
}

// ABI 2: each host gets its own plugin context (memra_plugin_api.ctx), so each host's
// plugins see that host's services, and one host going away leaves the other's intact.
TEST_F(PluginsHost, TwoLiveHostsEachInitialiseTheirOwnContext) {
  const fs::path file = test_plugin("memra-family-good");
  LogCapture log_b;
  auto greeting = [](std::string value) {
    return [value](std::string_view key) -> std::optional<std::string> {
      if (key == "good.greeting") return value;
      return std::nullopt;
    };
  };
  PluginHostOptions oa = test::isolated_options(log, {});
  oa.services.config = greeting("from a");
  PluginHostOptions ob = test::isolated_options(log_b, {});
  ob.services.config = greeting("from b");
  auto a = std::make_unique<PluginHost>(std::move(oa));
  ASSERT_TRUE(a->load(file).ok());
  auto b = std::make_unique<PluginHost>(std::move(ob));
  ASSERT_TRUE(b->load(file).ok());
  EXPECT_EQ(log.containing("[good-family] greeting: from a").size(), 1u);
  EXPECT_EQ(log_b.containing("[good-family] greeting: from b").size(), 1u);
  EXPECT_TRUE(log.containing("from b").empty());

  // b's shutdown runs through b's services only; a's plugin keeps working.
  b.reset();
  EXPECT_EQ(log_b.containing("[good-family] shutdown").size(), 1u);
  EXPECT_TRUE(log.containing("[good-family] shutdown").empty());
  auto plan = a->family("good-family")->plan_create("{}");
  ASSERT_TRUE(plan.ok());
  memra_weight_set weights{};
  weights.struct_size = MEMRA_WEIGHT_SET_STRUCT_SIZE;
  auto model = plan->create_model(weights, nullptr);  // memory_alloc through a's services
  ASSERT_TRUE(model.ok()) << model.error().message;
  model = make_error(ErrorCode::internal, "dropped");
  plan = make_error(ErrorCode::internal, "dropped");
  a.reset();
  EXPECT_EQ(log.containing("[good-family] shutdown").size(), 1u);
  EXPECT_FALSE(test::is_loaded(file));
}

TEST_F(PluginsHost, RefusedLibrariesAreUnloaded) {
  discover_all();
  EXPECT_FALSE(test::is_loaded(test_plugin("memra-quant-initfail")));
  EXPECT_FALSE(test::is_loaded(test_plugin("memra-quant-abi1")));
  EXPECT_TRUE(test::is_loaded(test_plugin("memra-quant-good")));
}

TEST_F(PluginsHost, LoadRefusesFilesNotNamedLikePlugins) {
  PluginHost h(test::isolated_options(log, {}));
  auto r = h.load(test::test_plugin_dir() / "libother-quant-x.so");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("file name is not libmemra-family-<name>.so or libmemra-quant-<name>.so"));
  ASSERT_EQ(h.refusals().size(), 1u);
}

TEST_F(PluginsHost, ADirectoryListedTwiceIsScannedOnce) {
  PluginHost h(test::isolated_options(log, {test::test_plugin_dir(), test::test_plugin_dir() / "."}));
  h.discover();
  EXPECT_EQ(h.plugins().size(), 5u);
  EXPECT_EQ(h.search_dirs().size(), 1u);
  for (const Refusal& r : h.refusals()) {
    EXPECT_THAT(r.reason, ::testing::Not(HasSubstr("'good-quant'")));
  }
}

}  // namespace
}  // namespace memra::plugins
