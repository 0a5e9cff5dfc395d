#include "repack/tool/precision.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <set>

#include "repack/format/layout.hpp"

namespace memra::repack {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct Decision {
  std::string scheme;
  std::string rule;    // rule key: what the tensors have in common
  std::string reason;
};

}  // namespace

const std::vector<std::string>& quant_choices() {
  static const std::vector<std::string> k = {"keep", "bf16", "f16", "q8_0", "q6_k", "q5_k", "q4_k", "iq4_xs", "q4_0", "fp8"};
  return k;
}

bool overridable_scheme(const std::string& s) {
  return s == "f32" || s == "f16" || s == "bf16" || (s != "keep" && std::find(quant_choices().begin(), quant_choices().end(), s) != quant_choices().end());
}

Result<PrecisionPlan> plan_precision(const Source& source, const std::string& req, const std::vector<SchemeOverride>& overrides,
                                     const PluginSchemeBytes& plugin_bytes, const std::map<std::string, std::string>& keep_as_stored) {
  for (const SchemeOverride& o : overrides)
    if (!overridable_scheme(o.scheme))
      return make_error(ErrorCode::invalid_argument, "--tensor-scheme " + o.pattern + "=" + o.scheme +
                                                         ": choose f32, f16, bf16, q8_0, q6_k, q5_k, q4_k, iq4_xs, q4_0 or fp8");
  // A scheme of a quant plugin: its quantiser writes the matrices it can hold.
  const bool plugin_scheme = std::find(quant_choices().begin(), quant_choices().end(), req) == quant_choices().end() &&
                             plugin_bytes && plugin_bytes(req, {1, 256}).has_value();
  if (!plugin_scheme && std::find(quant_choices().begin(), quant_choices().end(), req) == quant_choices().end())
    return make_error(ErrorCode::invalid_argument, "unknown --quant '" + req + "'; choose one of keep, bf16, f16, q8_0, q6_k, q5_k, q4_k, iq4_xs, q4_0, fp8 " +
                                                       "or a scheme of an installed quant plugin");
  // The 4/5-bit targets: their head and attn_v get 6 bits.
  const bool low_bit = req == "q4_k" || req == "q5_k" || req == "iq4_xs" || req == "q4_0";
  const bool tied = source.config().tie_word_embeddings;
  PrecisionPlan plan;
  std::set<std::string> names;
  // rule key -> (scheme, reason, tensors)
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::vector<std::string>>> rules;

  for (size_t i = 0; i < source.tensors().size(); ++i) {
    const SourceTensor& t = source.tensors()[i];
    if (!names.insert(t.name).second)
      return make_error(ErrorCode::invalid_argument, "two tensors of " + source.path().string() + " map to the name '" + t.name + "'");
    const bool convertible = Source::convertible(t.scheme);
    const auto kept = keep_as_stored.find(t.name);
    Decision d{t.scheme, "", ""};
    if (t.shape.size() == 1 && convertible) {
      d = {"f32", "1-D tensors (norms, biases)", "the engine's norm and bias ops take float32; widened exactly"};
    } else if (req == "keep" || !convertible || t.shape.size() < 2) {
      d = {t.scheme, "everything else",
           req == "keep"  ? "--quant keep: carried as stored"
           : !convertible ? "memra has no exact conversion from " + t.scheme + ": carried as stored"
                          : "not a matrix: carried as stored"};
    } else if (plugin_scheme) {
      // The backends' embedding kernels are built in: the token table stays as stored.
      const bool fits = t.name != "token_embd.weight" && kept == keep_as_stored.end() && plugin_bytes(req, t.shape).has_value();
      d = fits ? Decision{req, "matrices", "--quant " + req + ": quantized by the quant plugin's quantiser"}
               : Decision{t.scheme, t.name == "token_embd.weight" ? "token_embd.weight" : "matrices the plugin cannot hold",
                          "a plugin scheme serves matmul only: kept as stored"};
    } else if (req == "bf16" || req == "f16") {
      d = {req, "matrices", "--quant " + req + ": converted from their exact float32 values"};
    } else {
      // A quantization target.
      const bool head = t.name == "output.weight" || (tied && t.name == "token_embd.weight");
      std::string want = req;
      std::string rule = "matrices", reason = "--quant " + req + ": quantized by memra_quantize";
      if (kept != keep_as_stored.end()) {
        want = t.scheme, rule = "kept by the family plugin", reason = kept->second + ": kept as stored";
      } else if (head && low_bit) {
        want = "q6_k", rule = tied ? "output head (tied to the embeddings)" : "output head";
        reason = "the head's error moves every logit: 6-bit, as in llama.cpp's 4/5-bit mixes";
      } else if ((head || t.name == "token_embd.weight") && req == "fp8") {
        want = t.scheme, rule = head ? "output head" : "token_embd.weight";
        reason = "fp8 checkpoints keep embeddings and the head in 16-bit: kept as stored";
      } else if (low_bit && ends_with(t.name, "attn_v.weight")) {
        want = "q6_k", rule = "attn_v.weight", reason = "small under grouped-query attention; its error reaches the output directly: 6-bit";
      }
      // Rows that break the block size fall back.
      const uint64_t block = format::scheme_block_elements(want);
      if (want != t.scheme && block > 1 && t.shape.back() % block != 0) {
        const bool q8 = t.shape.back() % 32 == 0 && req != "fp8";
        rule = "rows of " + std::to_string(t.shape.back()) + " columns";
        reason = want + " needs rows in multiples of " + std::to_string(block) + ": " + (q8 ? "q8_0 instead" : "kept as stored");
        want = q8 ? "q8_0" : t.scheme;
      }
      d = {want, rule, reason};
    }
    for (const SchemeOverride& o : overrides) {
      if (::fnmatch(o.pattern.c_str(), t.name.c_str(), 0) != 0) continue;
      if (o.scheme != t.scheme && (!convertible || !format::tensor_bytes(o.scheme, 1, t.shape) ||
                                   (t.shape.size() < 2 && o.scheme != "f32" && o.scheme != "f16" && o.scheme != "bf16"))) {
        const uint64_t block = format::scheme_block_elements(o.scheme);
        const std::string why = block > 1 && !t.shape.empty() && t.shape.back() % block != 0
                                    ? ": its rows have " + std::to_string(t.shape.back()) + " columns, " + o.scheme +
                                          " needs a multiple of " + std::to_string(block)
                                    : "";
        return make_error(ErrorCode::invalid_argument, "--tensor-scheme " + o.pattern + "=" + o.scheme + ": tensor '" + t.name +
                                                           "' (" + t.scheme + ") cannot be written as " + o.scheme + why);
      }
      d = {o.scheme, "--tensor-scheme " + o.pattern, "requested on the command line"};
      break;
    }
    TensorPlan tp;
    tp.source_index = i;
    tp.scheme = d.scheme;
    tp.copy = d.scheme == t.scheme;
    if (!tp.copy && !format::tensor_bytes(d.scheme, 1, t.shape) && !(plugin_scheme && d.scheme == req))
      return make_error(ErrorCode::internal, "tensor '" + t.name + "' cannot be written as " + d.scheme);
    plan.tensors.push_back(tp);
    auto& r = rules[{d.rule, d.scheme}];
    r.first = d.reason;
    r.second.push_back(t.name);
  }
  plan.precision.requested = req;
  for (const auto& [key, value] : rules) {
    const std::vector<std::string>& members = value.second;
    std::string what = key.first;
    if (members.size() > 1) what += ", " + std::to_string(members.size()) + " tensors";
    else if (members[0] != what) what += ": " + members[0];
    plan.precision.rules.push_back({what, key.second, value.first});
  }
  return plan;
}

}  // namespace memra::repack
