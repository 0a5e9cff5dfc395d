// Shared pieces of the built-in families' plans and bindings, compiled into each family
// .so: the plan's tensor list and the binding of the host's weights to it, the RoPE and
// expert settings of a normalised config, and the Hugging Face decoder-layer names every
// transformers causal LM shares.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memra/backend.h"
#include "memra/family.h"

namespace memra::family {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // outermost first
  bool matrix = false;         // 2-D weight used by matmul (any quant scheme)
  bool any_float = false;      // read by the family's own op in its stored float type (f32, bf16, f16)
  // Why a quantizing repack should keep this matrix as stored ("" = quantize it like the
  // others): the plan's "keep_as_stored" (docs/PLUGINS.md, "Plans"), e.g. a MoE router.
  std::string keep_as_stored = {};
};

// Why MoE routers (and a shared expert's sigmoid gate) stay as stored under quantization.
inline constexpr const char* kKeepRouter = "a MoE router: tiny, and expert routing is sensitive to its error";

// One tensor of the plan's JSON (plan_describe): name, shape, matrix, keep_as_stored if set.
nlohmann::json tensor_json(const TensorSpec& s);

// An integer key of the normalised config; throws std::runtime_error naming it when absent.
int64_t need_int(const nlohmann::json& config, const char* key);

// The host's weights bound to the plan's tensors: `copy` holds the host's descriptors, and
// `by_name` points into it. False with `error` naming the first tensor that is missing, has
// another shape, or another type than the spec allows (non-matrix tensors are F32; an
// any_float one may come as [C][K] for a planned [C][1][K]).
bool bind_tensors(const std::vector<TensorSpec>& specs, const memra_weight_set& set, std::vector<memra_weight>& copy,
                  std::unordered_map<std::string, const memra_weight*>& by_name, std::string& error);

// The config's "rope" object as memra_rope_params for heads of head_dim; false with `error`
// (prefixed by `who`) for a rotary_dim, theta or scaling the backends do not have.
bool rope_from_config(const nlohmann::json& config, int64_t head_dim, memra_rope_params& rope, std::string& error,
                      const std::string& who);

// Sparse MLPs: which layers are sparse (num_experts > 0: every decoder_sparse_step-th layer
// not in mlp_only_layers, as transformers decides) and the experts' sizes.
struct ExpertPlan {
  std::vector<uint8_t> layer_moe;
  int32_t experts = 0, top_k = 0;
  int64_t expert_width = 0, shared_width = 0;
  bool normalize_top_k = false;
};
// `normalize_default`: norm_topk_prob when the config leaves it out. A shared expert is
// refused (with `error`) unless `allow_shared`.
bool experts_from_config(const nlohmann::json& config, int64_t layers, bool normalize_default, bool allow_shared, ExpertPlan& out,
                         std::string& error, const std::string& who);

// A Hugging Face decoder tensor name as (layer, the rest after "layers.N."), after one of
// `prefixes` ("model.", ...); nullopt when it is not a layer's.
std::optional<std::pair<int, std::string_view>> hf_layer_part(std::string_view name, std::initializer_list<std::string_view> prefixes);
// A name with one of `prefixes` removed (the first that matches).
std::string_view strip_prefix(std::string_view name, std::initializer_list<std::string_view> prefixes);
// A Hugging Face expert tensor (after "mlp." of the layer whose canonical prefix is `block`, "blk.L.") as its part of the stacked
// expert tensors moe_ffn takes (memra/family.h tensor_parts, the JSON array): per-expert
// "experts.E.{gate,up,down}_proj.weight" → slice E of "blk.L.ffn_{gate,up,down}_exps.weight";
// transformers 5's fused "experts.gate_up_proj" [E][2 * width][hidden] → its halves, gate then
// up. nullopt for anything else.
std::optional<std::string> hf_expert_parts(const std::string& block, std::string_view rest);
// llama.cpp's fused "blk.L.ffn_gate_up_exps.weight" [E][2 * width][hidden] (its converter's
// --fuse-gate-up-exps: torch.cat([gate, up], dim=1)) as its halves, gate then up; nullopt for
// any other GGUF name.
std::optional<std::string> gguf_fused_expert_parts(std::string_view name);
// transformers 5's stacked "experts.down_proj" [E][hidden][width] (after "mlp."): the canonical
// "blk.L.ffn_down_exps.weight" as it stands; nullopt for anything else.
std::optional<std::string> hf_stacked_expert_name(const std::string& block, std::string_view rest);

// One PAGED_KV state group per entry of `group_layers` (whose storage the groups point
// into): kv_heads x head_dim, the host's KV dtype, the window of the group's first layer
// (`layer_window`: 0 = full attention).
std::vector<memra_state_group> paged_kv_groups(const std::vector<std::vector<int32_t>>& group_layers, int64_t kv_heads,
                                               int64_t head_dim, const std::vector<int32_t>& layer_window);

// The layers a forward step runs (ABI 2.2 layer ranges, a pipeline stage): [first, last),
// all of them without a range. A range after layer 0 continues from the 2 carried tensors
// (the residual stream and the last layer's output the family carries); one before the end
// leaves them. MEMRA_ERR_INVALID_ARGUMENT with `error` (prefixed by `who`) otherwise.
memra_status layer_range(const memra_forward_batch& batch, int64_t layers, const std::string& who, int64_t& first, int64_t& last,
                         std::string& error);

// A named op's arguments with the attributes (their struct's version and size) and the
// batch set; the caller adds tensors and weights.
template <class Attrs>
memra_op_args op_args(int32_t layer, uint32_t version, const Attrs& attrs, const memra_forward_batch* batch) {
  memra_op_args a{};
  a.struct_size = MEMRA_OP_ARGS_STRUCT_SIZE;
  a.layer = layer;
  a.attrs_version = version;
  a.attrs = &attrs;
  a.attrs_size = sizeof(Attrs);
  a.batch = batch;
  return a;
}

}  // namespace memra::family
