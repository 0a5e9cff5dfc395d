// Ops by name on the CUDA backend: decay_scan v1 over recurrent-state slots, bitwise
// against kernels/recurrent/decay_scan_ref.cpp, with the engine's slot operations
// (copy for fork / snapshot / restore, zero for a new sequence) in between.
#include <cstring>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "kernels/recurrent/decay_scan_ref.hpp"
#include "memra/ops.h"

namespace memra::kcheck {
namespace {

constexpr int32_t kWidth = 300, kSlots = 4;

// One step over `tokens` rows of the sequences `seqs` (each row's sequence index), with
// each sequence's state slot; y on the device, returned.
std::vector<float> scan_step(Device& d, const memra_op* op, const std::vector<int32_t>& row_seq, const std::vector<int32_t>& slots,
                             const std::vector<float>& x, float decay) {
  d.begin_step();
  const auto t = static_cast<int32_t>(row_seq.size());
  std::vector<int32_t> ids(static_cast<size_t>(t), 0), pos(static_cast<size_t>(t), 0), lens(slots.size(), 1),
      tables(slots.size(), 0);
  memra_forward_batch b{};
  b.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
  b.num_tokens = t;
  b.token_ids = ids.data();
  b.positions = pos.data();
  b.seq_index = row_seq.data();
  b.num_seqs = static_cast<int32_t>(slots.size());
  b.seq_lens = lens.data();
  b.block_tables = tables.data();
  b.max_blocks_per_seq = 1;
  b.state_slots = slots.data();
  memra_tensor xt = d.upload(x, {t, kWidth}), yt = d.tensor({t, kWidth});
  const memra_decay_scan_attrs_v1 attrs{MEMRA_DECAY_SCAN_ATTRS_V1_STRUCT_SIZE, decay, kWidth};
  const memra_tensor* in[1] = {&xt};
  memra_tensor* out[1] = {&yt};
  memra_op_args a{};
  a.struct_size = MEMRA_OP_ARGS_STRUCT_SIZE;
  a.layer = 0;
  a.attrs_version = MEMRA_OP_DECAY_SCAN_V1;
  a.attrs = &attrs;
  a.attrs_size = sizeof attrs;
  a.num_inputs = 1;
  a.num_outputs = 1;
  a.inputs = in;
  a.outputs = out;
  a.batch = &b;
  d.check(d.ops().op_run(d.ctx(), op, &a), "op_run(decay_scan)");
  return d.download(yt);
}

}  // namespace

void check_recurrent(Device& d, Report& r, const CheckOptions& o) {
  const std::string name = "decay_scan v1 over state slots (copy, zero) bitwise == reference";
  if (!r.wants(name)) return;
  r.guard(name, [&] {
    Rng rng(o.seed ^ 0x7363616e);
    backend::StateConfig state;
    state.kv = backend::KvCacheConfig::uniform(1, 0, 0, 16, 4);  // the layer keeps no KV, only its state
    state.recurrent.slots = kSlots;
    state.recurrent.layer_bytes = {kWidth * sizeof(float)};
    d.check(d.backend().allocate_state(state), "allocate_state");
    const memra_op* op = nullptr;
    d.check(d.ops().op_find(d.ctx(), MEMRA_OP_DECAY_SCAN, MEMRA_OP_DECAY_SCAN_V1, &op), "op_find(decay_scan v1)");
    const float decay = 0.83f;
    // The reference's slots.
    std::vector<std::vector<float>> ref(kSlots, std::vector<float>(kWidth, 0.0f));
    auto ref_step = [&](const std::vector<int32_t>& row_seq, const std::vector<int32_t>& slots, const std::vector<float>& x) {
      std::vector<float> y(x.size());
      for (size_t t = 0; t < row_seq.size(); ++t)
        ref::decay_scan_row(decay, x.data() + t * kWidth, kWidth, ref[static_cast<size_t>(slots[static_cast<size_t>(row_seq[t])])].data(),
                            y.data() + t * kWidth);
      return y;
    };
    std::string bad;
    auto step = [&](const char* what, const std::vector<int32_t>& row_seq, const std::vector<int32_t>& slots) {
      const std::vector<float> x = rng.floats(row_seq.size() * kWidth);
      const std::vector<float> want = ref_step(row_seq, slots, x);
      if (!compare(scan_step(d, op, row_seq, slots, x, decay), want).bitwise) bad += std::string(" ") + what;
    };
    step("prefill(2 seqs, 3+2 rows)", {0, 0, 0, 1, 1}, {0, 1});
    step("decode", {0, 1}, {0, 1});
    // Fork sequence 0 into slot 2; both continue alike.
    d.check(d.backend().copy_state_slot(0, 2), "copy_state_slot");
    ref[2] = ref[0];
    step("after copy", {0, 1, 2}, {0, 1, 2});
    // A new sequence in slot 1.
    d.check(d.backend().reset_state_slot(1), "reset_state_slot");
    std::fill(ref[1].begin(), ref[1].end(), 0.0f);
    step("after zero", {0, 1, 1}, {2, 1});
    r.add(name, bad.empty(), bad.empty() ? "4 steps (prefill, decode, fork copy, zeroed slot) bitwise equal" : "differs at" + bad);
  });
}

}  // namespace memra::kcheck
