// family-qwen3next's CUDA kernels (plugins/family-qwen3next/qwen3next_kernels.cu), the file
// itself, on the host CTA emulator (no GPU needed), against the plugin's own CPU
// references (loaded through the plugin host, run as the CPU backend runs them) on the
// cases the plugin gives memra-kernel-check: bitwise, over two calls (the second starting
// from the recurrent state the first left). And the shared scalar math against libm.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/plugin_host/plugin_host.hpp"
#include "plugins/family-qwen3next/qwen3next_ops.hpp"
#include "tests/support/build_plugins.hpp"
#include "tests/cuda/cta_emulator.hpp"  // (last but one: it defines CUDA's keywords as macros)
#include "plugins/family-qwen3next/qwen3next_kernels.cu"

namespace {

using memra::plugins::FamilyPlugin;

const memra_op_def* op_named(const FamilyPlugin& f, const char* name) {
  for (const memra_op_def& d : f.ops())
    if (std::strcmp(d.name, name) == 0) return &d;
  return nullptr;
}

FamilyPlugin family() {
  auto f = memra::testing::build_plugins().family("qwen3next");
  if (!f) throw std::runtime_error(f.error().message);
  return *f;
}

struct Scratch {
  std::vector<std::vector<float>> blocks;
};

// The CPU reference's environment: host state (one slot per sequence), host batch arrays.
memra_op_env cpu_env(std::vector<uint8_t>& state, uint64_t stride, int32_t seqs, const memra_op_example& e, std::vector<int32_t>& slots,
                     Scratch& scratch) {
  memra_op_env env{};
  env.struct_size = MEMRA_OP_ENV_STRUCT_SIZE;
  env.backend = MEMRA_BACKEND_CPU;
  env.state = state.empty() ? nullptr : state.data();
  env.state_stride = stride;
  env.num_state_slots = seqs;
  env.positions = e.positions;
  env.seq_index = e.seq_index;
  env.state_slots = slots.data();
  env.scratch_ctx = &scratch;
  env.scratch = [](const memra_op_env* en, uint64_t bytes, void** out) {
    auto* s = static_cast<Scratch*>(en->scratch_ctx);
    s->blocks.emplace_back((bytes + 3) / 4);
    *out = s->blocks.back().data();
    return MEMRA_OK;
  };
  return env;
}

// A case's f32 weights as the host hands weights to ops.
struct ExampleWeights {
  std::vector<memra_weight> weights;
  std::vector<const memra_weight*> pointers;
  explicit ExampleWeights(const memra_op_example& e) : weights(static_cast<size_t>(e.num_weights)) {
    for (int32_t i = 0; i < e.num_weights; ++i) {
      memra_weight& w = weights[static_cast<size_t>(i)];
      w.struct_size = MEMRA_WEIGHT_STRUCT_SIZE;
      w.dtype = MEMRA_DTYPE_F32;
      w.ndim = 2;
      w.shape[0] = e.weight_shapes[2 * i], w.shape[1] = e.weight_shapes[2 * i + 1];
      w.bytes = static_cast<uint64_t>(w.shape[0] * w.shape[1]) * 4;
      w.data = e.weights[i];
    }
    for (const memra_weight& w : weights) pointers.push_back(&w);
  }
};

memra_tensor tensor(float* data, int64_t rows, int64_t cols) {
  memra_tensor t{};
  t.struct_size = MEMRA_TENSOR_STRUCT_SIZE;
  t.dtype = MEMRA_DTYPE_F32;
  t.ndim = 2;
  t.shape[0] = rows, t.shape[1] = cols;
  t.data = data;
  return t;
}

// One call of the DeltaNet op: `inputs` (kept by the caller) into y [rows][vd], its four
// weights and the batch; args is what run_cpu (or sources_of) takes.
struct GdnCall {
  std::vector<const memra_tensor*> ins;
  memra_tensor out{};
  memra_tensor* outs[1] = {&out};
  memra_op_args args{};
  GdnCall(const void* attrs, size_t attrs_size, std::vector<memra_tensor>& inputs, float* y, int64_t rows, int64_t vd,
          const memra_weight* const* weights, const memra_forward_batch* batch)
      : out(tensor(y, rows, vd)) {
    for (auto& t : inputs) ins.push_back(&t);
    args.struct_size = MEMRA_OP_ARGS_STRUCT_SIZE;
    args.attrs_version = 1;
    args.attrs = attrs;
    args.attrs_size = attrs_size;
    args.num_inputs = static_cast<int32_t>(ins.size()), args.inputs = ins.data(), args.num_outputs = 1, args.outputs = outs;
    args.num_weights = 4, args.weights = weights;
    args.batch = batch;
  }
  GdnCall(const GdnCall&) = delete;
};

TEST(Qwen3NextEmulated, TheDeltaNetKernelsAreTheReferenceBitwise) {
  const FamilyPlugin f = family();
  const memra_op_def* op = op_named(f, "qwen3next.gated_delta_net");
  ASSERT_NE(op, nullptr);
  for (int32_t index = 0;; ++index) {
    memra_op_example e{};
    e.struct_size = MEMRA_OP_EXAMPLE_STRUCT_SIZE;
    if (op->example(f.ctx(), index, &e) == MEMRA_ERR_NOT_FOUND) break;
    // Cases 1 and 2 (128-wide heads in Hugging Face's layouts) take the emulator most of a
    // minute each; case 3 has the same sizes with every layout flag, and memra-kernel-check
    // runs them all on the GPU.
    if (index == 1 || index == 2) continue;
    SCOPED_TRACE(e.label);
    const auto& at = *static_cast<const memra::qwen3next::GdnAttrsV1*>(e.attrs);
    const int32_t hk = at.num_k_heads, hv = at.num_v_heads, dk = at.head_k_dim, dv = at.head_v_dim, kc = at.conv_kernel;
    const float eps = at.norm_eps;
    const int64_t kd = int64_t{hk} * dk, vd = int64_t{hv} * dv, c_dim = 2 * kd + vd, T = e.num_tokens;
    std::vector<int32_t> slots(static_cast<size_t>(e.num_seqs));
    for (int32_t s = 0; s < e.num_seqs; ++s) slots[static_cast<size_t>(s)] = e.num_seqs - 1 - s;  // not the identity
    // Snapshots after every other row, into slots after the sequences' (MEMRA_OP_SNAPSHOTS).
    std::vector<int32_t> snaps(static_cast<size_t>(e.num_tokens), -1);
    for (int32_t t = 0; t < e.num_tokens; t += 2) snaps[static_cast<size_t>(t)] = e.num_seqs + t;
    const int32_t num_slots = e.num_seqs + e.num_tokens;
    std::vector<uint8_t> cpu_state(e.state_bytes * static_cast<uint64_t>(num_slots), 0), emu_state = cpu_state, fused_state = cpu_state;
    const bool small = e.num_tokens <= Q3N_FUSED_ROWS;  // the decode form runs too (the CUDA form picks it for these)
    std::vector<std::vector<float>> in;
    std::vector<memra_tensor> tin;
    for (int32_t i = 0; i < e.num_inputs; ++i) in.emplace_back(e.inputs[i], e.inputs[i] + e.input_shapes[2 * i] * e.input_shapes[2 * i + 1]);
    for (int32_t i = 0; i < e.num_inputs; ++i) tin.push_back(tensor(in[i].data(), e.input_shapes[2 * i], e.input_shapes[2 * i + 1]));
    const ExampleWeights ew(e);
    const memra_weight* const* wp = ew.pointers.data();
    memra_forward_batch b{};
    b.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
    b.num_tokens = e.num_tokens;
    b.num_seqs = e.num_seqs;
    b.seq_index = e.seq_index;
    b.positions = e.positions;
    b.state_slots = slots.data();
    for (int call = 0; call < 2; ++call) {
      SCOPED_TRACE(call);
      std::vector<float> y_cpu(static_cast<size_t>(T * vd), NAN), y_emu(static_cast<size_t>(T * vd), NAN);
      Scratch scratch;
      memra_op_env env = cpu_env(cpu_state, e.state_bytes, num_slots, e, slots, scratch);
      env.snapshot_slots = snaps.data();
      GdnCall gdn(e.attrs, e.attrs_size, tin, y_cpu.data(), T, vd, wp, &b);
      const memra_op_args& args = gdn.args;
      ASSERT_EQ(op->run_cpu(f.ctx(), &env, &args), MEMRA_OK) << f.last_error();
      // The same step through the kernels, as the CUDA form launches them.
      const memra::qwen3next::GdnAttrsV1 attrs = at;
      const q3n_sources src = memra::qwen3next::sources_of(attrs, &args);
      std::vector<float> conv(static_cast<size_t>(T * c_dim), NAN);
      char* st = reinterpret_cast<char*>(emu_state.data());
      memra::cuda_emu::launch(static_cast<unsigned>((c_dim + 63) / 64), 1, 64,
                              [&] {
                                q3n_gdn_conv(src, e.num_tokens, kc, e.weights[0], MEMRA_DTYPE_F32, e.seq_index, slots.data(),
                                             snaps.data(), st, e.state_bytes, conv.data());
                              },
                              [] {});
      const int64_t T64 = e.num_tokens;
      std::vector<float> qn(static_cast<size_t>(T64 * hk * dk), NAN), kn = qn, beta(static_cast<size_t>(T64 * hv), NAN), decay = beta;
      memra::cuda_emu::launch(static_cast<unsigned>((T64 * hk + 3) / 4), 1, 128,
                              [&] {
                                q3n_gdn_prep(src, conv.data(), e.num_tokens, e.weights[1], e.weights[2], qn.data(), kn.data(),
                                             beta.data(), decay.data());
                              },
                              [] {});
      memra::cuda_emu::launch(static_cast<unsigned>(hv), static_cast<unsigned>((dv + Q3N_RECUR_WARPS - 1) / Q3N_RECUR_WARPS),
                              Q3N_RECUR_WARPS * 32,
                              [&] {
                                q3n_gdn_recur(src, conv.data(), qn.data(), kn.data(), beta.data(), decay.data(), e.num_tokens, kc,
                                              e.seq_index, slots.data(), snaps.data(), st, e.state_bytes, y_emu.data());
                              },
                              [] { std::memset(smem_raw, 0xff, sizeof smem_raw); });
      memra::cuda_emu::launch(static_cast<unsigned>((T64 * hv + 3) / 4), 1, 128,
                              [&] { q3n_gdn_out(src, e.num_tokens, e.weights[3], eps, y_emu.data()); }, [] {});
      EXPECT_EQ(std::memcmp(y_cpu.data(), y_emu.data(), y_cpu.size() * 4), 0) << "outputs";
      EXPECT_EQ(std::memcmp(cpu_state.data(), emu_state.data(), cpu_state.size()), 0) << "states";
      if (!small) continue;
      // The decode form: q3n_gdn_fused, then q3n_gdn_out_conv.
      std::vector<float> y_fused(static_cast<size_t>(T * vd), NAN);
      char* fs = reinterpret_cast<char*>(fused_state.data());
      memra::cuda_emu::launch(static_cast<unsigned>(hv), static_cast<unsigned>((dv + Q3N_RECUR_WARPS - 1) / Q3N_RECUR_WARPS),
                              Q3N_RECUR_WARPS * 32,
                              [&] {
                                q3n_gdn_fused(src, e.num_tokens, kc, e.weights[0], MEMRA_DTYPE_F32, e.weights[1], e.weights[2],
                                              e.seq_index, slots.data(), snaps.data(), fs, e.state_bytes, y_fused.data());
                              },
                              [] {});
      const auto out_blocks = static_cast<int32_t>((T64 * hv + 3) / 4);
      memra::cuda_emu::launch(static_cast<unsigned>(out_blocks + (c_dim + 127) / 128), 1, 128,
                              [&] {
                                q3n_gdn_out_conv(src, e.num_tokens, e.weights[3], eps, y_fused.data(), out_blocks, kc, e.seq_index,
                                                 slots.data(), snaps.data(), fs, e.state_bytes);
                              },
                              [] {});
      EXPECT_EQ(std::memcmp(y_cpu.data(), y_fused.data(), y_cpu.size() * 4), 0) << "outputs of the decode form";
      EXPECT_EQ(std::memcmp(cpu_state.data(), fused_state.data(), cpu_state.size()), 0) << "states of the decode form";
    }
  }
}

TEST(Qwen3NextEmulated, TheElementwiseKernelsAreTheReferenceBitwise) {
  const FamilyPlugin f = family();
  for (const char* name : {"qwen3next.split_gate", "qwen3next.sigmoid_mul"}) {
    const memra_op_def* op = op_named(f, name);
    ASSERT_NE(op, nullptr) << name;
    for (int32_t index = 0;; ++index) {
      memra_op_example e{};
      e.struct_size = MEMRA_OP_EXAMPLE_STRUCT_SIZE;
      if (op->example(f.ctx(), index, &e) == MEMRA_ERR_NOT_FOUND) break;
      SCOPED_TRACE(std::string(name) + ": " + e.label);
      std::vector<std::vector<float>> in, out_cpu, out_emu;
      std::vector<memra_tensor> ti, to;
      for (int32_t i = 0; i < e.num_inputs; ++i)
        in.emplace_back(e.inputs[i], e.inputs[i] + e.input_shapes[2 * i] * e.input_shapes[2 * i + 1]);
      for (int32_t i = 0; i < e.num_outputs; ++i) {
        out_cpu.emplace_back(static_cast<size_t>(e.output_shapes[2 * i] * e.output_shapes[2 * i + 1]), NAN);
        out_emu.push_back(out_cpu.back());
      }
      for (int32_t i = 0; i < e.num_inputs; ++i) ti.push_back(tensor(in[i].data(), e.input_shapes[2 * i], e.input_shapes[2 * i + 1]));
      for (int32_t i = 0; i < e.num_outputs; ++i)
        to.push_back(tensor(out_cpu[i].data(), e.output_shapes[2 * i], e.output_shapes[2 * i + 1]));
      std::vector<const memra_tensor*> ins;
      std::vector<memra_tensor*> outs;
      for (auto& t : ti) ins.push_back(&t);
      for (auto& t : to) outs.push_back(&t);
      memra_op_env env{};
      env.struct_size = MEMRA_OP_ENV_STRUCT_SIZE;
      memra_op_args args{};
      args.struct_size = MEMRA_OP_ARGS_STRUCT_SIZE;
      args.attrs_version = 1;
      args.attrs = e.attrs;
      args.attrs_size = e.attrs_size;
      args.num_inputs = e.num_inputs, args.inputs = ins.data(), args.num_outputs = e.num_outputs, args.outputs = outs.data();
      ASSERT_EQ(op->run_cpu(f.ctx(), &env, &args), MEMRA_OK) << f.last_error();
      if (std::strcmp(name, "qwen3next.split_gate") == 0) {
        const int32_t d = static_cast<const memra::qwen3next::SplitGateAttrsV1*>(e.attrs)->head_dim;
        const long long rows = static_cast<long long>(out_emu[0].size()) / d;
        memra::cuda_emu::launch(static_cast<unsigned>((rows * d + 255) / 256), 1, 256,
                                [&] { q3n_split_gate(in[0].data(), rows, d, out_emu[0].data(), out_emu[1].data()); }, [] {});
      } else {
        const int32_t n = static_cast<int32_t>(e.input_shapes[1]), gw = static_cast<int32_t>(e.input_shapes[3]);
        const long long rows = e.input_shapes[0];
        memra::cuda_emu::launch(static_cast<unsigned>((rows * n + 255) / 256), 1, 256,
                                [&] { q3n_sigmoid_mul(in[0].data(), in[1].data(), rows, n, gw, out_emu[0].data()); }, [] {});
      }
      for (int32_t i = 0; i < e.num_outputs; ++i)
        EXPECT_EQ(std::memcmp(out_cpu[i].data(), out_emu[i].data(), out_cpu[i].size() * 4), 0) << "output " << i;
    }
  }
}

// Qwen3-Next's grouped rows, Qwen3.5's split rows and llama.cpp's GGUF forms of both (A
// stored as -exp(A_log); Qwen3.5's value heads in tiled order) are layouts of one
// computation: the grouped case's rows and weights rearranged here (transformers'
// fix_query_key_value_ordering and llama.cpp's _reorder_v_heads, written again) give
// bitwise the grouped run's outputs, over two calls (the second from the state the first left).
TEST(Qwen3NextOps, EveryLayoutIsOneComputation) {
  const FamilyPlugin f = family();
  const memra_op_def* op = op_named(f, "qwen3next.gated_delta_net");
  ASSERT_NE(op, nullptr);
  memra_op_example e{};
  e.struct_size = MEMRA_OP_EXAMPLE_STRUCT_SIZE;
  ASSERT_EQ(op->example(f.ctx(), 1, &e), MEMRA_OK);  // grouped, Hk 2 / Hv 6 heads of 128
  const memra::qwen3next::GdnAttrsV1 at = *static_cast<const memra::qwen3next::GdnAttrsV1*>(e.attrs);
  ASSERT_EQ(at.layout, 0);
  const int64_t hk = at.num_k_heads, hv = at.num_v_heads, dk = at.head_k_dim, dv = at.head_v_dim, r = hv / hk, kc = at.conv_kernel;
  const int64_t kd = hk * dk, vd = hv * dv, c_dim = 2 * kd + vd, T = e.num_tokens, group = 2 * dk + 2 * r * dv;
  std::vector<float> qkvz(e.inputs[0], e.inputs[0] + T * (2 * kd + 2 * vd)), ba(e.inputs[1], e.inputs[1] + T * 2 * hv);
  std::vector<float> qkv(static_cast<size_t>(T * c_dim)), z(static_cast<size_t>(T * vd)), b(static_cast<size_t>(T * hv)),
      a(static_cast<size_t>(T * hv));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < hk; ++g) {
      const float* in = qkvz.data() + t * (2 * kd + 2 * vd) + g * group;
      std::copy_n(in, dk, qkv.data() + t * c_dim + g * dk);
      std::copy_n(in + dk, dk, qkv.data() + t * c_dim + kd + g * dk);
      std::copy_n(in + 2 * dk, r * dv, qkv.data() + t * c_dim + 2 * kd + g * r * dv);
      std::copy_n(in + 2 * dk + r * dv, r * dv, z.data() + t * vd + g * r * dv);
      std::copy_n(ba.data() + t * 2 * hv + g * 2 * r, r, b.data() + t * hv + g * r);
      std::copy_n(ba.data() + t * 2 * hv + g * 2 * r + r, r, a.data() + t * hv + g * r);
    }
  // llama.cpp's tiled order: value head h (key head h / r) moves to (h % r) * Hk + h / r.
  auto tiled = [&](int64_t h) { return (h % r) * hk + h / r; };
  std::vector<float> qkv_t = qkv, z_t = z, b_t = b, a_t = a;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < hv; ++h) {
      std::copy_n(qkv.data() + t * c_dim + 2 * kd + h * dv, dv, qkv_t.data() + t * c_dim + 2 * kd + tiled(h) * dv);
      std::copy_n(z.data() + t * vd + h * dv, dv, z_t.data() + t * vd + tiled(h) * dv);
      b_t[static_cast<size_t>(t * hv + tiled(h))] = b[static_cast<size_t>(t * hv + h)];
      a_t[static_cast<size_t>(t * hv + tiled(h))] = a[static_cast<size_t>(t * hv + h)];
    }
  // Weights: A = -exp(A_log) (as the kernels compute it, so the product is the same float),
  // and the tiled run's conv rows, A and dt_bias reordered alike.
  const ExampleWeights ew(e);
  const float* conv_w = e.weights[0];
  const float* a_log = e.weights[1];
  const float* dt_bias = e.weights[2];
  std::vector<float> big_a(static_cast<size_t>(hv)), conv_tw(conv_w, conv_w + c_dim * kc), big_a_t(big_a.size()),
      dt_t(dt_bias, dt_bias + hv);
  for (int64_t h = 0; h < hv; ++h) big_a[static_cast<size_t>(h)] = -q3n_exp(a_log[h]);
  for (int64_t h = 0; h < hv; ++h) {
    std::copy_n(conv_w + (2 * kd + h * dv) * kc, dv * kc, conv_tw.data() + (2 * kd + tiled(h) * dv) * kc);
    big_a_t[static_cast<size_t>(tiled(h))] = big_a[static_cast<size_t>(h)];
    dt_t[static_cast<size_t>(tiled(h))] = dt_bias[h];
  }
  ExampleWeights with_a(e), tiled_w(e);
  with_a.weights[1].data = big_a.data();
  tiled_w.weights[0].data = conv_tw.data();
  tiled_w.weights[1].data = big_a_t.data();
  tiled_w.weights[2].data = dt_t.data();

  std::vector<int32_t> slots(static_cast<size_t>(e.num_seqs));
  for (int32_t s = 0; s < e.num_seqs; ++s) slots[static_cast<size_t>(s)] = s;
  memra_forward_batch batch{};
  batch.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
  batch.num_tokens = e.num_tokens;
  batch.num_seqs = e.num_seqs;
  batch.seq_index = e.seq_index;
  batch.positions = e.positions;
  batch.state_slots = slots.data();
  auto run = [&](int32_t layout, std::vector<memra_tensor> inputs, const ExampleWeights& w, std::vector<uint8_t>& state) {
    memra::qwen3next::GdnAttrsV1 attrs = at;
    attrs.layout = layout;
    std::vector<float> y(static_cast<size_t>(T * vd), NAN);
    if (state.empty()) state.assign(e.state_bytes * static_cast<uint64_t>(e.num_seqs), 0);
    Scratch scratch;
    const memra_op_env env = cpu_env(state, e.state_bytes, e.num_seqs, e, slots, scratch);
    GdnCall call(&attrs, sizeof attrs, inputs, y.data(), T, vd, w.pointers.data(), &batch);
    EXPECT_EQ(op->run_cpu(f.ctx(), &env, &call.args), MEMRA_OK) << f.last_error();
    return y;
  };
  constexpr int32_t kSplit = QWEN3NEXT_GDN_SPLIT_QKVZ | QWEN3NEXT_GDN_SPLIT_BA;
  std::vector<uint8_t> s_grouped, s_split, s_next_gguf, s_35_gguf;
  for (int call = 0; call < 2; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    const std::vector<float> yg = run(0, {tensor(qkvz.data(), T, 2 * kd + 2 * vd), tensor(ba.data(), T, 2 * hv)}, ew, s_grouped);
    const std::vector<float> ys = run(kSplit, {tensor(qkv.data(), T, c_dim), tensor(z.data(), T, vd), tensor(b.data(), T, hv),
                                               tensor(a.data(), T, hv)},
                                      ew, s_split);
    EXPECT_EQ(std::memcmp(yg.data(), ys.data(), yg.size() * 4), 0) << "Hugging Face's Qwen3.5 layout";
    const std::vector<float> yn = run(QWEN3NEXT_GDN_SPLIT_QKVZ | QWEN3NEXT_GDN_A_DIRECT,
                                      {tensor(qkv.data(), T, c_dim), tensor(z.data(), T, vd), tensor(ba.data(), T, 2 * hv)}, with_a,
                                      s_next_gguf);
    EXPECT_EQ(std::memcmp(yg.data(), yn.data(), yg.size() * 4), 0) << "llama.cpp's Qwen3-Next layout";
    const std::vector<float> yt = run(kSplit | QWEN3NEXT_GDN_V_TILED | QWEN3NEXT_GDN_A_DIRECT,
                                      {tensor(qkv_t.data(), T, c_dim), tensor(z_t.data(), T, vd), tensor(b_t.data(), T, hv),
                                       tensor(a_t.data(), T, hv)},
                                      tiled_w, s_35_gguf);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < hv; ++h)
        EXPECT_EQ(std::memcmp(yg.data() + t * vd + h * dv, yt.data() + t * vd + tiled(h) * dv, static_cast<size_t>(dv) * 4), 0)
            << "llama.cpp's Qwen3.5 layout, row " << t << " value head " << h;
  }
  EXPECT_EQ(s_grouped, s_split);
  EXPECT_EQ(s_grouped, s_next_gguf);
}

// A row's snapshot (MEMRA_OP_SNAPSHOTS) is bitwise the state its sequence's live slot holds
// when the step ends at that row: the case's rows up to t run as one step leave it there.
TEST(Qwen3NextOps, ASnapshotIsTheStateAfterItsRow) {
  const FamilyPlugin f = family();
  const memra_op_def* op = op_named(f, "qwen3next.gated_delta_net");
  ASSERT_NE(op, nullptr);
  ASSERT_TRUE(op->flags & MEMRA_OP_SNAPSHOTS);
  memra_op_example e{};
  e.struct_size = MEMRA_OP_EXAMPLE_STRUCT_SIZE;
  ASSERT_EQ(op->example(f.ctx(), 4, &e), MEMRA_OK);  // split qkv/z, grouped ba, 6 rows of 2 sequences
  const auto& at = *static_cast<const memra::qwen3next::GdnAttrsV1*>(e.attrs);
  const int64_t vd = int64_t{at.num_v_heads} * at.head_v_dim;
  const int32_t seqs = e.num_seqs, T = e.num_tokens, num_slots = seqs + T;
  std::vector<int32_t> slots(static_cast<size_t>(seqs));
  for (int32_t s = 0; s < seqs; ++s) slots[static_cast<size_t>(s)] = s;
  const ExampleWeights ew(e);
  // Runs rows [0, rows) of the case as one step; snapshots after every row when asked.
  auto run = [&](int32_t rows, bool snapshots) {
    std::vector<uint8_t> state(e.state_bytes * static_cast<uint64_t>(num_slots), 0);
    std::vector<int32_t> snaps(static_cast<size_t>(rows));
    for (int32_t t = 0; t < rows; ++t) snaps[static_cast<size_t>(t)] = seqs + t;
    std::vector<std::vector<float>> in;
    std::vector<memra_tensor> tin;
    for (int32_t i = 0; i < e.num_inputs; ++i) {
      const int64_t cols = e.input_shapes[2 * i + 1];
      in.emplace_back(e.inputs[i], e.inputs[i] + rows * cols);
    }
    for (int32_t i = 0; i < e.num_inputs; ++i) tin.push_back(tensor(in[static_cast<size_t>(i)].data(), rows, e.input_shapes[2 * i + 1]));
    std::vector<float> y(static_cast<size_t>(rows * vd), NAN);
    memra_forward_batch b{};
    b.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
    b.num_tokens = rows;
    b.num_seqs = seqs;
    b.seq_index = e.seq_index;
    b.positions = e.positions;
    b.state_slots = slots.data();
    Scratch scratch;
    memra_op_env env = cpu_env(state, e.state_bytes, num_slots, e, slots, scratch);
    if (snapshots) env.snapshot_slots = snaps.data();
    GdnCall call(e.attrs, e.attrs_size, tin, y.data(), rows, vd, ew.pointers.data(), &b);
    EXPECT_EQ(op->run_cpu(f.ctx(), &env, &call.args), MEMRA_OK) << f.last_error();
    return state;
  };
  const std::vector<uint8_t> full = run(T, true);
  for (int32_t t = 0; t < T; ++t) {
    const std::vector<uint8_t> prefix = run(t + 1, false);
    const uint64_t live = static_cast<uint64_t>(slots[static_cast<size_t>(e.seq_index[t])]) * e.state_bytes;
    EXPECT_EQ(std::memcmp(full.data() + static_cast<uint64_t>(seqs + t) * e.state_bytes, prefix.data() + live, e.state_bytes), 0)
        << "row " << t;
  }
}

// The shared scalar math stays within a few ulp of libm's (double-precision) values.
TEST(Qwen3NextMath, ExpLog1pAndSoftplusAreAccurate) {
  double worst_exp = 0, worst_log1p = 0, worst_softplus = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    worst_exp = std::max(worst_exp, std::fabs(q3n_exp(x) - want) / want);
  }
  for (float y = 0.0f; y <= 1.0f; y += 0.000731f) {
    const double want = std::log1p(static_cast<double>(y));
    if (want > 0) worst_log1p = std::max(worst_log1p, std::fabs(q3n_log1p01(y) - want) / want);
  }
  for (float x = -40.0f; x < 40.0f; x += 0.0071f) {
    const double want = x > 20.0f ? x : std::log1p(std::exp(static_cast<double>(x)));
    worst_softplus = std::max(worst_softplus, std::fabs(q3n_softplus(x) - want) / want);
  }
  std::cout << "max relative error: exp " << worst_exp << ", log1p " << worst_log1p << ", softplus " << worst_softplus << "\n";
  EXPECT_LT(worst_exp, 4 * 1.2e-7);
  EXPECT_LT(worst_log1p, 4 * 1.2e-7);
  EXPECT_LT(worst_softplus, 4 * 1.2e-7);
  EXPECT_EQ(q3n_exp(-200.0f), 0.0f);
  EXPECT_TRUE(std::isinf(q3n_exp(100.0f)));
}

}  // namespace
