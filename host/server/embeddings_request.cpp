#include "host/server/embeddings_request.hpp"

#include <climits>
#include <map>

#include "host/server/body_checker.hpp"

namespace memra::server {
namespace {

using json = nlohmann::ordered_json;
using Policy = FieldPolicy;

const std::map<std::string, Policy, std::less<>>& fields() {
  static const std::map<std::string, Policy, std::less<>> k = {
      {"model", Policy::honoured},      {"input", Policy::honoured}, {"encoding_format", Policy::honoured},
      {"dimensions", Policy::honoured}, {"user", Policy::harmless},
  };
  return k;
}

constexpr const char* kInputShapes =
    "a non-empty string, an array of strings, an array of token ids or an array of arrays of token ids";

struct EmbeddingsChecker : BodyChecker {
  void check_fields() {
    for (const auto& [name, value] : body.items()) {
      if (fields().find(name) == fields().end())
        return fail("unknown_parameter", name,
                    "Unrecognized request argument supplied: " + name +
                        " (/v1/embeddings takes model, input, encoding_format, dimensions and user)");
    }
    if (const json* v = field("user"); v && !v->is_string()) wrong_type("user", "a string");
  }

  void model(std::string& out) {
    const json* m = field("model");
    if (m == nullptr) return fail("missing_required_parameter", "model", "'model' is required");
    if (!m->is_string()) return wrong_type("model", "a string");
    out = m->get<std::string>();
  }

  // One token list (non-empty, ids in int32 range; the vocabulary is the route's check).
  bool tokens(const json& list, const std::string& at, std::vector<PromptInput>& out) {
    if (list.empty()) {
      fail("invalid_value", at, quoted(at) + " is empty; an input needs at least one token");
      return false;
    }
    PromptInput in{true, {}, {}};
    for (const auto& t : list) {
      if (!t.is_number_integer() || (t.is_number_unsigned() ? t.get<std::uint64_t>() > INT32_MAX
                                                            : (t.get<std::int64_t>() < 0 || t.get<std::int64_t>() > INT32_MAX))) {
        fail("invalid_type", at, quoted(at) + " must hold token ids (integers from 0)");
        return false;
      }
      in.tokens.push_back(static_cast<std::int32_t>(t.get<std::int64_t>()));
    }
    out.push_back(std::move(in));
    return true;
  }

  bool text(const json& s, const std::string& at, std::vector<PromptInput>& out) {
    if (s.get_ref<const std::string&>().empty()) {
      fail("invalid_value", at, quoted(at) + " is an empty string; every input must have text");
      return false;
    }
    out.push_back({false, s.get<std::string>(), {}});
    return true;
  }

  void input(std::vector<PromptInput>& out) {
    const json* p = field("input");
    if (p == nullptr) return fail("missing_required_parameter", "input", std::string("'input' is required: ") + kInputShapes);
    if (p->is_string()) {
      text(*p, "input", out);
      return;
    }
    if (!p->is_array()) return wrong_type("input", kInputShapes);
    if (p->empty()) return fail("invalid_value", "input", "'input' is an empty array; send at least one input");
    if (p->size() > kMaxEmbeddingInputs)
      return fail("invalid_value", "input", "'input' holds " + std::to_string(p->size()) + " items; at most " +
                                                std::to_string(kMaxEmbeddingInputs) + " per request");
    const json& first = (*p)[0];
    if (first.is_number()) {
      tokens(*p, "input", out);
      return;
    }
    for (size_t i = 0; i < p->size(); ++i) {
      const json& e = (*p)[i];
      const std::string at = "input[" + std::to_string(i) + "]";
      const bool ok = first.is_string() && e.is_string()  ? text(e, at, out)
                      : first.is_array() && e.is_array() ? tokens(e, at, out)
                                                          : (wrong_type("input", kInputShapes), false);
      if (!ok) return;
    }
  }

  void encoding(bool& base64) {
    const json* e = field("encoding_format");
    if (e == nullptr) return;
    if (!e->is_string()) return wrong_type("encoding_format", "\"float\" or \"base64\"");
    const std::string v = e->get<std::string>();
    if (v != "float" && v != "base64")
      return fail("invalid_value", "encoding_format", "'encoding_format' must be \"float\" or \"base64\", got \"" + v + "\"");
    base64 = v == "base64";
  }

  void dimensions(std::optional<std::int64_t>& out) {
    const json* d = field("dimensions");
    if (d == nullptr) return;
    if (!d->is_number_integer()) return wrong_type("dimensions", "an integer");
    if (d->is_number_unsigned() ? (d->get<std::uint64_t>() > INT64_MAX || d->get<std::uint64_t>() == 0) : d->get<std::int64_t>() < 1)
      return fail("invalid_value", "dimensions", "'dimensions' must be at least 1, got " + d->dump());
    out = d->get<std::int64_t>();
  }
};

}  // namespace

std::vector<std::pair<std::string, std::string>> embeddings_field_policies() {
  return policy_table(fields());
}

Parsed<EmbeddingsRequest> parse_embeddings_body(std::string_view body) {
  Parsed<EmbeddingsRequest> out;
  auto doc = parse_json_body(body, out.error);
  if (!doc) return out;
  EmbeddingsChecker check{{*doc}};
  EmbeddingsRequest r;
  check.check_fields();
  if (!check.failed()) check.model(r.model);
  if (!check.failed()) check.input(r.inputs);
  if (!check.failed()) check.encoding(r.base64);
  if (!check.failed()) check.dimensions(r.dimensions);
  if (check.failed()) {
    out.error = std::move(check.error);
    return out;
  }
  out.value = std::move(r);
  return out;
}

}  // namespace memra::server
