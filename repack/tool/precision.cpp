#include "repack/tool/precision.hpp"

#include "repack/checkpoint/checkpoint_import.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <set>

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

bool is_float(const std::string& s) { return s == "f32" || s == "f16" || s == "bf16"; }

}  // namespace

Result<PrecisionPlan> plan_precision(const Source& source, const std::string& req, const SchemeCatalog& schemes,
                                     const std::vector<SchemeOverride>& overrides,
                                     const std::map<std::string, std::string>& keep_as_stored) {
  const std::vector<std::string> tensor_schemes = schemes.tensor_schemes();
  for (const SchemeOverride& o : overrides)
    if (std::find(tensor_schemes.begin(), tensor_schemes.end(), o.scheme) == tensor_schemes.end())
      return make_error(ErrorCode::invalid_argument, "--tensor-scheme " + o.pattern + "=" + o.scheme + ": choose " + join_or(tensor_schemes));
  const std::vector<std::string> targets = schemes.quant_targets();
  if (std::find(targets.begin(), targets.end(), req) == targets.end())
    return make_error(ErrorCode::invalid_argument, "unknown --quant '" + req + "'; choose " + join_or(targets) +
                                                       " (the schemes of the installed quant plugins)");
  const SchemeFacts* target = req == "keep" ? nullptr : schemes.find(req);
  const bool tied = source.config().tie_word_embeddings;
  PrecisionPlan plan;
  std::set<std::string> names;
  // rule key -> (scheme, reason, tensors)
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::vector<std::string>>> rules;

  for (size_t i = 0; i < source.tensors().size(); ++i) {
    const SourceTensor& t = source.tensors()[i];
    if (!names.insert(t.name).second)
      return make_error(ErrorCode::invalid_argument, "two tensors of " + source.path().string() + " map to the name '" + t.name + "'");
    // A weight a quant plugin imported converts through its exact values (its plugin's dequantiser).
    const bool convertible = Source::convertible(t.scheme) || t.imported != nullptr;
    const auto kept = keep_as_stored.find(t.name);
    Decision d{t.scheme, "", ""};
    if (t.shape.size() == 1 && convertible) {
      d = {"f32", "1-D tensors (norms, biases)", "the engine's norm and bias ops take float32; widened exactly"};
    } else if (!target || !convertible || t.shape.size() < 2) {
      d = {t.scheme, t.imported ? "checkpoint weights stored quantised" : "everything else",
           t.imported     ? "read as published by quant plugin '" + t.imported->plugin() + "'"
           : !target      ? "--quant keep: carried as stored"
           : !convertible ? "memra has no exact conversion from " + t.scheme + ": carried as stored"
                          : "not a matrix: carried as stored"};
    } else if (target->block_elems == 1 && is_float(req)) {
      d = {req, "matrices", "--quant " + req + ": converted from their exact float32 values"};
    } else {
      // A quantization target, with its plugin's mix (memra_scheme_info).
      const bool head = t.name == "output.weight" || (tied && t.name == "token_embd.weight");
      const bool embd = t.name == "token_embd.weight";
      std::string want = req;
      std::string rule = "matrices", reason = "--quant " + req + ": quantized by quant plugin '" + target->plugin + "'";
      const bool keep_head = (target->keep_as_stored & MEMRA_KEEP_HEAD) != 0;
      const bool keep_embd = (target->keep_as_stored & MEMRA_KEEP_TOKEN_EMBD) != 0;
      if (kept != keep_as_stored.end()) {
        want = t.scheme, rule = "kept by the family plugin", reason = kept->second + ": kept as stored";
      } else if ((head && keep_head) || (embd && keep_embd)) {
        want = t.scheme, rule = head ? "output head" : "token_embd.weight";
        reason = req + " keeps " + (head ? "the output head" : "the token embeddings") + " as stored (its quant plugin's mix)";
      } else if (head && !target->sensitive.empty()) {
        want = target->sensitive, rule = tied ? "output head (tied to the embeddings)" : "output head";
        reason = "the head's error moves every logit: " + want + ", as in llama.cpp's mixes";
      } else if (!target->sensitive.empty() && ends_with(t.name, "attn_v.weight")) {
        want = target->sensitive, rule = "attn_v.weight";
        reason = "small under grouped-query attention; its error reaches the output directly: " + want;
      }
      // Rows the scheme cannot hold (its block, or its plugin's limits) fall back.
      if (want != t.scheme && !schemes.bytes(want, t.shape)) {
        const SchemeFacts* w = schemes.find(want);
        const uint64_t block = w ? static_cast<uint64_t>(w->block_elems) : 1;
        const std::string fb = w ? w->fallback : "";
        const bool use_fb = !fb.empty() && fb != want && schemes.bytes(fb, t.shape).has_value();
        rule = block > 1 && t.shape.back() % block != 0 ? "rows of " + std::to_string(t.shape.back()) + " columns"
                                                        : "matrices " + want + " cannot hold";
        reason = want + (block > 1 ? " needs rows in multiples of " + std::to_string(block) : " cannot hold them") + ": " +
                 (use_fb ? fb + " instead" : "kept as stored");
        want = use_fb ? fb : t.scheme;
      }
      d = {want, rule, reason};
    }
    for (const SchemeOverride& o : overrides) {
      if (::fnmatch(o.pattern.c_str(), t.name.c_str(), 0) != 0) continue;
      if (o.scheme != t.scheme && (!convertible || !schemes.bytes(o.scheme, t.shape) || (t.shape.size() < 2 && !is_float(o.scheme)))) {
        const SchemeFacts* f = schemes.find(o.scheme);
        const uint64_t block = f ? static_cast<uint64_t>(f->block_elems) : 1;
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
    if (!tp.copy && !schemes.bytes(d.scheme, t.shape))
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
