// decay_scan.v1's argument checks (host/ops/op_registry.hpp's entry), the same on every
// backend that implements it: one input x and one output y as [tokens][width], the batch
// with a state slot per sequence, and a layer of this backend that keeps width floats of
// recurrent state per sequence.
#pragma once

#include <cstdint>
#include <string>

#include "core/common/tensor_shape.hpp"
#include "host/backend/backend.hpp"
#include "memra/ops.h"

namespace memra::backend {

// "" when a's arguments fit the op and `state`, else why (MEMRA_ERR_INVALID_ARGUMENT).
// local: the layer's index among this backend's (a.layer minus its first layer).
inline std::string decay_scan_args_error(const memra_op_args& a, const RecurrentStateConfig& state, int64_t local) {
  const auto& attrs = *static_cast<const memra_decay_scan_attrs_v1*>(a.attrs);
  const memra_forward_batch* batch = a.batch;
  if (a.num_inputs != 1 || a.num_outputs != 1 || !a.inputs || !a.outputs || !a.inputs[0] || !a.outputs[0] || !batch)
    return "decay_scan: takes one input, one output and the batch";
  if (!MEMRA_STRUCT_HAS(batch, memra_forward_batch, state_slots) || !batch->state_slots)
    return "decay_scan: the batch carries no state slots";
  const memra_tensor* x = a.inputs[0];
  const memra_tensor* y = a.outputs[0];
  const int64_t w = attrs.width;
  if (w <= 0 || tensor_last_dim(x) != w || tensor_last_dim(y) != w || tensor_numel(x) != w * batch->num_tokens ||
      tensor_numel(y) != tensor_numel(x))
    return "decay_scan: x and y must be [tokens][width]";
  if (local < 0 || static_cast<size_t>(local) >= state.layer_bytes.size() ||
      state.layer_bytes[static_cast<size_t>(local)] != static_cast<uint64_t>(w) * sizeof(float))
    return "decay_scan: layer " + std::to_string(a.layer) + " keeps no recurrent state of width " + std::to_string(w);
  for (int32_t s = 0; s < batch->num_seqs; ++s)
    if (batch->state_slots[s] < 0 || batch->state_slots[s] >= state.slots)
      return "decay_scan: sequence " + std::to_string(s) + " has a bad state slot";
  return "";
}

}  // namespace memra::backend
