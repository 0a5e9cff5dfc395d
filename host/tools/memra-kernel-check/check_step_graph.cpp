// Step graphs (on by default; BackendOptions::step_graphs): a small decode step (embedding, norms, quant and
// float matmuls, gated activation, logits gather and copy) run eagerly, then captured
// as a graph, then replayed with other token ids: every logit must be bitwise the
// eager one for the same ids (a graph may not change a launch or its order), and
// the replay must follow the new ids (it reads the step's inputs, not the capture's).
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "host/tools/memra-kernel-check/checks.hpp"

namespace memra::kcheck {
using backend::BackendStats;
namespace {

struct StepWeights {
  const memra_weight *emb, *norm1, *norm2, *gate, *up, *down, *head;
};


// One step over `ids` (one token each at position `pos`); returns the logits.
std::vector<float> run_step(Device& d, const StepWeights& w, const std::vector<int32_t>& ids, int32_t pos, int64_t dim,
                            int64_t ffn, int64_t vocab) {
  d.begin_step();
  const auto t = static_cast<int64_t>(ids.size());
  std::vector<int32_t> positions(ids.size(), pos), seq(ids.size(), 0), tables = {0}, rows(ids.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int32_t>(i);
  int32_t seq_len = pos + 1;
  std::vector<float> logits(static_cast<size_t>(t * vocab), NAN);
  memra_forward_batch b{};
  b.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
  b.num_tokens = static_cast<int32_t>(t);
  b.token_ids = ids.data();
  b.positions = positions.data();
  b.seq_index = seq.data();
  b.num_seqs = 1;
  b.seq_lens = &seq_len;
  b.block_tables = tables.data();
  b.max_blocks_per_seq = 1;
  b.num_logits = static_cast<int32_t>(t);
  b.logits_rows = rows.data();
  b.logits = logits.data();
  const auto& o = d.ops();
  memra_tensor x = d.tensor({t, dim}), h = d.tensor({t, dim}), g = d.tensor({t, ffn}), u = d.tensor({t, ffn}),
               a = d.tensor({t, ffn}), y = d.tensor({t, dim}), h2 = d.tensor({t, dim}), l = d.tensor({t, vocab}),
               lo = d.tensor({t, vocab});
  d.check(o.embedding(d.ctx(), w.emb, &b, 1.0f, &x), "embedding");
  d.check(o.rms_norm(d.ctx(), &x, w.norm1, 1e-6f, 0.0f, &h), "rms_norm");
  d.check(o.matmul(d.ctx(), &h, w.gate, nullptr, &g), "matmul gate");
  d.check(o.matmul(d.ctx(), &h, w.up, nullptr, &u), "matmul up");
  d.check(o.gated_activation(d.ctx(), MEMRA_ACTIVATION_SILU, &g, &u, &a), "silu_mul");
  d.check(o.matmul(d.ctx(), &a, w.down, nullptr, &y), "matmul down");
  d.check(o.add_rms_norm(d.ctx(), &y, &x, w.norm2, 1e-6f, 0.0f, &h2), "add_rms_norm");
  d.check(o.matmul(d.ctx(), &h2, w.head, nullptr, &l), "matmul head");
  d.check(o.gather_logit_rows(d.ctx(), &l, &b, &lo), "gather_logit_rows");
  d.check(o.logits_output(d.ctx(), &lo, &b), "logits_output");
  return logits;
}

}  // namespace

void check_step_graph(Device& d, Report& r, const CheckOptions& o) {
  const std::string name = "step graph: capture and replay bitwise == eager";
  if (!r.wants(name)) return;
  r.guard(name, [&] {
    Rng rng(o.seed ^ 0x67726170);
    const int64_t dim = 512, ffn = 1536, vocab = 3000;
    // Graphs are a backend setting: the eager steps run on a second backend without them,
    // holding the same weights.
    const std::unique_ptr<Device> eager = d.reopen([](backend::BackendOptions& b) { b.step_graphs = false; });
    if (!d.options().step_graphs) throw Failure("step graphs are turned off for this run (MEMRA_CUDA_GRAPH=0)");
    StepWeights w{}, we{};
    auto wt = [&](const memra_weight** graph, const memra_weight** plain, const char* n, const std::string& s, int64_t rows, int64_t cols) {
      std::vector<uint8_t> bytes = random_weight(rng, s, rows, cols, "random");
      *plain = eager->weight(n, s, dtype_of(s), {rows, cols}, bytes);
      *graph = d.weight(n, s, dtype_of(s), {rows, cols}, std::move(bytes));
    };
    auto norm = [&](const memra_weight** graph, const memra_weight** plain, const char* n) {
      const std::vector<float> v = rng.floats(static_cast<size_t>(dim));
      *plain = eager->f32_weight(n, v);
      *graph = d.f32_weight(n, v);
    };
    wt(&w.emb, &we.emb, "g.emb", "bf16", vocab, dim);
    norm(&w.norm1, &we.norm1, "g.norm1");
    norm(&w.norm2, &we.norm2, "g.norm2");
    wt(&w.gate, &we.gate, "g.gate", "q4_k", ffn, dim);
    wt(&w.up, &we.up, "g.up", "q8_0", ffn, dim);
    wt(&w.down, &we.down, "g.down", "q6_k", dim, ffn);
    wt(&w.head, &we.head, "g.head", "bf16", vocab, dim);
    const std::vector<int32_t> ids1 = {17}, ids2 = {2999}, ids4 = {5, 9, 1234, 17};

    const std::vector<float> e1 = run_step(*eager, we, ids1, 3, dim, ffn, vocab);
    const std::vector<float> e2 = run_step(*eager, we, ids2, 4, dim, ffn, vocab);
    const std::vector<float> e4 = run_step(*eager, we, ids4, 5, dim, ffn, vocab);
    std::vector<std::vector<float>> g;
    g.push_back(run_step(d, w, ids1, 3, dim, ffn, vocab));  // capture
    g.push_back(run_step(d, w, ids2, 4, dim, ffn, vocab));  // replay, new ids
    g.push_back(run_step(d, w, ids1, 3, dim, ffn, vocab));  // replay
    g.push_back(run_step(d, w, ids4, 5, dim, ffn, vocab));  // M=4: new graph
    g.push_back(run_step(d, w, ids2, 4, dim, ffn, vocab));  // M=1 again
    const BackendStats stats = d.backend().stats();
    const std::vector<const std::vector<float>*> want = {&e1, &e2, &e1, &e4, &e2};
    std::string bad;
    for (size_t i = 0; i < g.size(); ++i)
      if (!compare(g[i], *want[i]).bitwise) bad += " step " + std::to_string(i);
    if (compare(e1, e2).bitwise) bad += " (eager logits do not depend on the ids: the check cannot fail)";
    if (stats.graph_replays < 2) bad += " (only " + std::to_string(stats.graph_replays) + " graph replays: the graph path did not run)";
    r.add(name, bad.empty(), bad.empty() ? "5 graph steps (M=1 capture, 2 replays, M=4, M=1) bitwise equal" : "differs at" + bad);
  });
}

}  // namespace memra::kcheck
