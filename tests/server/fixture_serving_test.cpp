// Fixture models served end to end: the real memra-host (--backend cpu, or cuda where it
// runs) on a transformers fixture (../shared/fixtures/models/<name>), the reference prompt's
// ids through /v1/completions:
//  - greedily it answers transformers' 24 greedy ids: each logprobs token is the text of the
//    reference id (as /detokenize spells it) and the text is theirs joined;
//  - the same request again with the answer and 3 more ids appended (a second turn) hits the
//    prefix cache (usage.prompt_tokens_details.cached_tokens: the first prompt's full blocks)
//    and answers exactly what a server without those blocks cached answers.
// The suite skips with a message when ../shared is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host_process.hpp"
#include "http_client.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/fixtures.hpp"

namespace memra::server::testing {
namespace {

using nlohmann::json;

struct Served {
  std::unique_ptr<HostProcess> host;
  std::string alias;
};

json post_json(const HostProcess& h, const std::string& path, const json& body) {
  const HttpResponse r = http(h.port(), post(path, body.dump()), 60000);
  EXPECT_EQ(r.status, 200) << path << ": " << r.body;
  const json doc = json::parse(r.body, nullptr, false);
  return doc.is_discarded() ? json::object() : doc;
}

json complete(const HostProcess& h, const std::string& alias, const std::vector<int32_t>& prompt, int max_tokens) {
  return post_json(h, "/v1/completions",
                   {{"model", alias}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"logprobs", 1}, {"ignore_eos", true}});
}

std::string detokenize(const HostProcess& h, const std::string& alias, const std::vector<int32_t>& ids) {
  return post_json(h, "/detokenize", {{"model", alias}, {"tokens", ids}}).value("prompt", std::string());
}

class ServedFixture : public memra::testing::BackendTest {};

void serves_transformers_greedy_ids(const std::string& model, memra_backend_kind kind) {
  const std::filesystem::path dir = memra::testing::fixture("models/" + model);
  if (!std::filesystem::exists(dir / "reference.json")) GTEST_SKIP() << "fixture " << dir << " absent (expects ../shared/fixtures)";
  const json ref = json::parse(std::ifstream(dir / "reference.json"));
  const auto input = ref["input_ids"].get<std::vector<int32_t>>();
  const auto greedy = ref["greedy_ids"].get<std::vector<int32_t>>();
  std::vector<std::string> args = {"--backend", memra::testing::backend_name(kind), "--no-repack", "--model", model + "=" + dir.string()};
  // The registry verifies a family per device architecture; a GPU run is the evidence still to come.
  if (kind == MEMRA_BACKEND_CUDA) args.push_back("--allow-generic");
  std::string why;
  auto host = HostProcess::start(args, {}, &why);
  ASSERT_TRUE(host) << why;

  const json first = complete(*host, model, input, static_cast<int>(greedy.size()));
  ASSERT_TRUE(first.contains("choices")) << first.dump();
  const json& tokens = first["choices"][0]["logprobs"]["tokens"];
  ASSERT_EQ(tokens.size(), greedy.size()) << first.dump();
  for (size_t i = 0; i < greedy.size(); ++i)
    EXPECT_EQ(tokens[i].get<std::string>(), detokenize(*host, model, {greedy[i]})) << "token " << i << " is not transformers' id " << greedy[i];
  EXPECT_EQ(first["choices"][0]["text"].get<std::string>(), detokenize(*host, model, greedy));
  EXPECT_EQ(first["usage"]["prompt_tokens"].get<int64_t>(), static_cast<int64_t>(input.size()));

  // The second turn: the first prompt's full blocks come from the prefix cache.
  std::vector<int32_t> turn = input;
  turn.insert(turn.end(), greedy.begin(), greedy.begin() + 8);
  turn.insert(turn.end(), {5, 77, 301});
  const json second = complete(*host, model, turn, 12);
  const int64_t cached = second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  EXPECT_GT(cached, 0) << "the second turn missed the prefix cache: " << second["usage"].dump();
  EXPECT_EQ(cached % 16, 0) << "whole blocks";
  auto fresh = HostProcess::start(args, {}, &why);
  ASSERT_TRUE(fresh) << why;
  const json cold = complete(*fresh, model, turn, 12);
  EXPECT_EQ(cold["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(second["choices"][0]["text"], cold["choices"][0]["text"]);
  EXPECT_EQ(second["choices"][0]["logprobs"]["token_logprobs"], cold["choices"][0]["logprobs"]["token_logprobs"])
      << "a prefix-cache hit changed the answer's logprobs";
}

// Gemma 3 text (family-gemma): a sliding-window layer and a global one, so the hit also
// carries the sliding pool's window blocks.
TEST_P(ServedFixture, Gemma3AnswersTransformersGreedyIdsAndHitsThePrefixCache) { serves_transformers_greedy_ids("gemma3_text", GetParam()); }

MEMRA_INSTANTIATE_BACKENDS(ServedFixture);

}  // namespace
}  // namespace memra::server::testing
