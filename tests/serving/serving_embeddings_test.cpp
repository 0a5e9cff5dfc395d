// POST /v1/embeddings on a real memra-host serving the committed embedding model
// (tests/models/qwen3-embedding-tiny, CPU backend) beside the random generation model:
// OpenAI's response shape against transformers' reference vectors (float, base64
// decoded back, dimensions, token ids), every refusal with its status and code, tenant
// keys, the metrics; and the openai npm client (openai_embeddings.mjs).
#include <gtest/gtest.h>

#include <Poco/Base64Decoder.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../server/error_shape.hpp"
#include "host/server/api_keys.hpp"
#include "serving_client.hpp"
#include "tests/support/command.hpp"
#include "tests/support/logits.hpp"

namespace memra::server::testing {
namespace {

using nlohmann::json;

constexpr const char* kEmbedding = "memra-embedding-tiny";
const std::string kModelDir = MEMRA_SOURCE_ROOT "/tests/models/qwen3-embedding-tiny";
constexpr int kContext = 128;

json reference() { return json::parse(std::ifstream(kModelDir + "/reference.json"))["cases"]; }

std::vector<std::string> host_args(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--model", std::string(kEmbedding) + "=" + kModelDir, "--max-context", std::to_string(kContext)};
  args.insert(args.end(), extra.begin(), extra.end());
  return with_tiny_random_model(args);
}

// One host for the suite: starting one costs more than the requests.
class ServingEmbeddings : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    host_ = HostProcess::start(host_args(), {}, &why).release();
    ASSERT_TRUE(host_) << why;
  }
  static void TearDownTestSuite() {
    delete host_;
    host_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(host_); }
  static HttpResponse embed(const json& body) { return http(host_->port(), post("/v1/embeddings", body.dump())); }
  static HostProcess* host_;
};
HostProcess* ServingEmbeddings::host_ = nullptr;

std::vector<float> decode_base64_f32(const std::string& text) {
  std::istringstream in(text);
  Poco::Base64Decoder decoder(in);
  const std::string bytes((std::istreambuf_iterator<char>(decoder)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.size() % 4, 0u);
  std::vector<float> out(bytes.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t bits = 0;
    for (int b = 0; b < 4; ++b) bits |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i * 4 + b])) << (8 * b);  // little-endian
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

double max_diff(const std::vector<float>& got, const json& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i].get<double>()));
  return worst;
}

TEST_F(ServingEmbeddings, FloatVectorsAreTheReferenceInOpenAisShape) {
  const json cases = reference();
  json inputs = json::array();
  int64_t tokens = 0;
  for (const auto& c : cases) {
    inputs.push_back(c["text"]);
    tokens += static_cast<int64_t>(c["input_ids"].size());
  }
  const HttpResponse r = embed({{"model", kEmbedding}, {"input", inputs}, {"user", "someone"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type.rfind("application/json", 0), 0u) << r.content_type;
  const json b = json::parse(r.body);
  EXPECT_EQ(b, json::object({{"object", "list"}, {"data", b["data"]}, {"model", kEmbedding},
                             {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}));
  ASSERT_EQ(b["data"].size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const json& d = b["data"][i];
    EXPECT_EQ(d.size(), 3u);
    EXPECT_EQ(d["object"], "embedding");
    EXPECT_EQ(d["index"], i);
    EXPECT_LE(max_diff(d["embedding"].get<std::vector<float>>(), cases[i]["embedding"]), ::memra::testing::kBf16EmbeddingMaxDiff) << cases[i]["text"];
  }
  // One string is one input.
  const HttpResponse one = embed({{"model", kEmbedding}, {"input", cases[0]["text"]}});
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(json::parse(one.body)["data"][0]["embedding"], b["data"][0]["embedding"]);
}

TEST_F(ServingEmbeddings, Base64IsLittleEndianFloat32OfTheSameVector) {
  const json cases = reference();
  for (const char* dims : {"", "64"}) {
    json body = {{"model", kEmbedding}, {"input", json::array({cases[1]["text"], cases[4]["text"]})}};
    if (*dims) body["dimensions"] = 64;
    const HttpResponse f = embed(body);
    body["encoding_format"] = "base64";
    const HttpResponse b64 = embed(body);
    ASSERT_EQ(f.status, 200) << f.body;
    ASSERT_EQ(b64.status, 200) << b64.body;
    const json floats = json::parse(f.body), encoded = json::parse(b64.body);
    for (size_t i = 0; i < 2; ++i) {
      const json& item = encoded.at("data").at(i);
      ASSERT_TRUE(item["embedding"].is_string()) << item;
      const std::vector<float> decoded = decode_base64_f32(item["embedding"].get<std::string>());
      EXPECT_EQ(decoded, floats.at("data").at(i).at("embedding").get<std::vector<float>>()) << "dimensions " << dims;
      const json& want = cases.at(i == 0 ? 1 : 4).at(*dims ? "embedding_64" : "embedding");
      EXPECT_LE(max_diff(decoded, want), ::memra::testing::kBf16EmbeddingMaxDiff);
    }
  }
}

TEST_F(ServingEmbeddings, TokenIdsGiveTheSameVectorsAsTheirText) {
  const json cases = reference();
  const HttpResponse text = embed({{"model", kEmbedding}, {"input", json::array({cases[2]["text"], cases[3]["text"]})}});
  const HttpResponse ids = embed({{"model", kEmbedding}, {"input", json::array({cases[2]["input_ids"], cases[3]["input_ids"]})}});
  const HttpResponse flat = embed({{"model", kEmbedding}, {"input", cases[3]["input_ids"]}});
  ASSERT_EQ(text.status, 200) << text.body;
  ASSERT_EQ(ids.status, 200) << ids.body;
  ASSERT_EQ(flat.status, 200) << flat.body;
  EXPECT_EQ(json::parse(text.body), json::parse(ids.body));
  EXPECT_EQ(json::parse(flat.body)["data"][0]["embedding"], json::parse(text.body)["data"][1]["embedding"]);
}

TEST_F(ServingEmbeddings, EveryRefusalHasItsStatusAndCode) {
  struct Bad {
    std::string label;
    json body;
    int status;
    std::string code, param;
  };
  const json e = kEmbedding;
  json many = json::array();
  for (int i = 0; i < 2049; ++i) many.push_back("x");
  const std::vector<Bad> bad = {
      {"a generation model", {{"model", "memra-tiny-random"}, {"input", "x"}}, 400, "model_not_embedding", "model"},
      {"an unknown model", {{"model", "nope"}, {"input", "x"}}, 404, "model_not_found", "model"},
      {"no model", {{"input", "x"}}, 400, "missing_required_parameter", "model"},
      {"an unknown field", {{"model", e}, {"input", "x"}, {"frobnicate", 1}}, 400, "unknown_parameter", "frobnicate"},
      {"no input", {{"model", e}}, 400, "missing_required_parameter", "input"},
      {"an empty string", {{"model", e}, {"input", ""}}, 400, "invalid_value", "input"},
      {"an empty array", {{"model", e}, {"input", json::array()}}, 400, "invalid_value", "input"},
      {"an empty string in the array", {{"model", e}, {"input", json::array({"a", ""})}}, 400, "invalid_value", "input[1]"},
      {"an empty token list", {{"model", e}, {"input", json::array({json::array({1, 2}), json::array()})}}, 400, "invalid_value", "input[1]"},
      {"mixed items", {{"model", e}, {"input", json::array({json("a"), json::array({1})})}}, 400, "invalid_type", "input"},
      {"a number", {{"model", e}, {"input", 5}}, 400, "invalid_type", "input"},
      {"2049 items", {{"model", e}, {"input", many}}, 400, "invalid_value", "input"},
      {"a token outside the vocabulary", {{"model", e}, {"input", json::array({1, 1024})}}, 400, "invalid_value", "input"},
      {"a negative token id", {{"model", e}, {"input", json::array({1, -1})}}, 400, "invalid_type", "input"},
      {"a fractional token id", {{"model", e}, {"input", json::array({json::array({1, 2.5})})}}, 400, "invalid_type", "input[0]"},
      {"longer than the context", {{"model", e}, {"input", std::vector<int>(kContext + 1, 7)}}, 400, "context_length_exceeded", "input"},
      {"dimensions 0", {{"model", e}, {"input", "x"}, {"dimensions", 0}}, 400, "invalid_value", "dimensions"},
      {"dimensions beyond the width", {{"model", e}, {"input", "x"}, {"dimensions", 257}}, 400, "invalid_value", "dimensions"},
      {"dimensions a string", {{"model", e}, {"input", "x"}, {"dimensions", "64"}}, 400, "invalid_type", "dimensions"},
      {"encoding_format hex", {{"model", e}, {"input", "x"}, {"encoding_format", "hex"}}, 400, "invalid_value", "encoding_format"},
      {"encoding_format a number", {{"model", e}, {"input", "x"}, {"encoding_format", 1}}, 400, "invalid_type", "encoding_format"},
      {"user a number", {{"model", e}, {"input", "x"}, {"user", 1}}, 400, "invalid_type", "user"},
  };
  for (const Bad& b : bad) {
    const HttpResponse r = embed(b.body);
    EXPECT_EQ(r.status, b.status) << b.label << ": " << r.body;
    EXPECT_TRUE(is_openai_error(r.content_type, r.body, b.code, b.param)) << b.label;
  }
  // Not JSON at all.
  const HttpResponse junk = http(host_->port(), post("/v1/embeddings", "{"));
  EXPECT_EQ(junk.status, 400);
  // The whole context is fine: an embedding generates nothing.
  const HttpResponse full = embed({{"model", e}, {"input", std::vector<int>(kContext, 7)}, {"dimensions", 256}});
  EXPECT_EQ(full.status, 200) << full.body;
}

TEST_F(ServingEmbeddings, TheMetricsCountTheVectorsAndTheRoute) {
  const double before = sample_sum(scrape(host_->port()), "memra_embeddings_total", {{"model", kEmbedding}});
  ASSERT_EQ(embed({{"model", kEmbedding}, {"input", json::array({"a", "b", "c"})}}).status, 200);
  const std::string after = scrape(host_->port());
  EXPECT_EQ(sample_sum(after, "memra_embeddings_total", {{"model", kEmbedding}}), before + 3);
  EXPECT_GE(sample_sum(after, "memra_http_requests_total", {{"route", "/v1/embeddings"}}), 1);
}

// Tenant keys apply as on every /v1 route.
TEST(ServingEmbeddingsKeys, TheRouteNeedsAKeyWhenKeysAreOn) {
  TempDir dir;
  const std::string good = "sk-embed-1";
  const auto keys = dir.write("keys.json", R"({"keys":[{"sha256":")" + sha256_hex(good) + R"(","tenant":"acme",
    "limits":{"max_kv_tokens":40}}]})");
  std::string why;
  auto host = HostProcess::start(host_args({"--api-keys", keys.string()}), {}, &why);
  ASSERT_TRUE(host) << why;
  const std::string body = json{{"model", kEmbedding}, {"input", "a"}}.dump();
  const HttpResponse none = http(host->port(), post("/v1/embeddings", body));
  EXPECT_EQ(none.status, 401) << none.body;
  const HttpResponse ok = http(host->port(), post("/v1/embeddings", body, good));
  EXPECT_EQ(ok.status, 200) << ok.body;
  // The tenant's KV budget holds every input at once.
  const HttpResponse big = http(host->port(), post("/v1/embeddings", json{{"model", kEmbedding}, {"input", std::vector<int>(41, 7)}}.dump(), good));
  EXPECT_EQ(big.status, 400) << big.body;
  EXPECT_TRUE(is_any_openai_error(big.content_type, big.body));
}

TEST(ServingEmbeddingsOpenai, TheOpenaiClientGetsTheReferenceVectors) {
  if (::memra::testing::run_command("node --version", ::memra::testing::Stderr::merge).exit_code != 0)
    GTEST_SKIP() << "node is not installed (scripts/setup installs it)";
  if (!std::filesystem::exists(std::filesystem::path(MEMRA_NODE_DIR) / "node_modules/openai/index.mjs"))
    GTEST_SKIP() << "the openai package is not installed in " << MEMRA_NODE_DIR << " (run scripts/setup)";
  std::string why;
  auto host = HostProcess::start(host_args(), {}, &why);
  ASSERT_TRUE(host) << why;
  const std::string base = "http://127.0.0.1:" + std::to_string(host->port()) + "/v1";
  const auto r = ::memra::testing::run_command(
      std::string("MEMRA_NODE_DIR='") + MEMRA_NODE_DIR + "' timeout 120 node '" + MEMRA_SOURCE_ROOT +
          "/tests/serving/openai_embeddings.mjs' '" + base + "' " + kEmbedding + " '" + kModelDir + "/reference.json' " +
          std::to_string(::memra::testing::kBf16EmbeddingMaxDiff),
      ::memra::testing::Stderr::merge);
  EXPECT_EQ(r.exit_code, 0) << r.out << "\nmemra-host log:\n" << host->log();
  EXPECT_NE(r.out.find("# pass 4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# fail 0"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace memra::server::testing
