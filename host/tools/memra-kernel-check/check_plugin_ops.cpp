// Ops a family plugin brings (memra_plugin_api.ops, ABI 2.7): each op's CUDA form against
// its own CPU reference on the cases the plugin gives (memra_op_def.example), through the
// backends' op_find / op_run as a forward pass calls them. Each case runs twice, so the
// second call starts from the RECURRENT state the first left; then sequence 0's slot is
// copied over the last one (a fork) and the first zeroed (a new sequence) and the case
// runs a third time. Outputs bitwise (or within the case's tolerance) on every call.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/plugin_host/plugin_host.hpp"
#include "host/backend/cpu/cpu_backend.hpp"
#include "host/backend/plugin_kernels.hpp"
#include "host/tools/memra-kernel-check/checks.hpp"

namespace memra::kcheck {
namespace {

// One case on one backend: the batch and the op's arguments over tensors `in` / `out`.
struct CaseRun {
  std::vector<int32_t> ids, lens, tables, slots;
  memra_forward_batch batch{};
  void init(const memra_op_example& e) {
    ids.assign(static_cast<size_t>(e.num_tokens), 0);
    lens.assign(static_cast<size_t>(e.num_seqs), 0);
    for (int32_t t = 0; t < e.num_tokens; ++t) lens[static_cast<size_t>(e.seq_index[t])] = std::max(lens[static_cast<size_t>(e.seq_index[t])], e.positions[t] + 1);
    tables.assign(static_cast<size_t>(e.num_seqs), 0);
    slots.resize(static_cast<size_t>(e.num_seqs));
    for (int32_t s = 0; s < e.num_seqs; ++s) slots[static_cast<size_t>(s)] = s;
    batch.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
    batch.num_tokens = e.num_tokens;
    batch.token_ids = ids.data();
    batch.positions = e.positions;
    batch.seq_index = e.seq_index;
    batch.num_seqs = e.num_seqs;
    batch.seq_lens = lens.data();
    batch.block_tables = tables.data();
    batch.max_blocks_per_seq = 1;
    batch.state_slots = e.state_bytes ? slots.data() : nullptr;
    batch.num_kv_pools = 1;
  }
};

}  // namespace

void check_plugin_ops(Device& d, Report& r, const CheckOptions& o, const std::vector<std::string>& plugin_dirs) {
  (void)o;
  plugins::PluginHostOptions po;
  for (const std::string& dir : plugin_dirs) po.plugin_dirs.emplace_back(dir);
  po.use_env_path = false;
  po.use_install_dir = false;
  po.services.log = [](memra_log_level, std::string_view) {};
  plugins::PluginHost host(std::move(po));
  host.discover();
  for (const plugins::PluginInfo& p : host.plugins()) {
    if (p.kind != plugins::PluginKind::family) continue;
    auto family = host.family(p.name);
    if (!family) continue;
    std::vector<ops::PluginOp> all;
    for (const memra_op_def& def : family->ops()) all.push_back({&def, family->ctx(), p.name});
    if (all.empty()) continue;
    for (const std::string& line : backend::register_plugin_ops(d.backend(), all)) r.add("plugin ops: " + p.name, false, line);
    for (const ops::PluginOp& op : all) {
      if (!op.def->run_cuda || !op.def->example) continue;
      for (int32_t index = 0;; ++index) {
        memra_op_example e{};
        e.struct_size = MEMRA_OP_EXAMPLE_STRUCT_SIZE;
        const memra_status got = op.def->example(op.ctx, index, &e);
        if (got == MEMRA_ERR_NOT_FOUND) break;
        const std::string name = "plugin op " + std::string(op.def->name) + " v" + std::to_string(op.def->version) + ": " +
                                 (got == MEMRA_OK && e.label ? e.label : "case " + std::to_string(index));
        if (!r.wants(name)) continue;
        if (got != MEMRA_OK) {
          r.add(name, false, "example() failed: " + family->last_error());
          break;
        }
        r.guard(name, [&] {
          // Both backends: one layer keeping no KV, only the case's state, a slot per sequence.
          backend::StateConfig state;
          state.kv = backend::KvCacheConfig::uniform(1, 0, 0, 16, 4);
          state.recurrent.slots = std::max(1, e.num_seqs);
          state.recurrent.layer_bytes = {e.state_bytes};
          backend::CpuBackend cpu(nullptr);
          d.check(cpu.allocate_state(state), "CPU allocate_state");
          (void)cpu.register_ops(std::span<const ops::PluginOp>(&op, 1), nullptr);
          d.check(d.backend().allocate_state(state), "allocate_state");
          const memra_op *cpu_op = nullptr, *gpu_op = nullptr;
          d.check(cpu.ops()->op_find(cpu.ops()->ctx, op.def->name, op.def->version, &cpu_op), "CPU op_find");
          d.check(d.ops().op_find(d.ctx(), op.def->name, op.def->version, &gpu_op), "op_find");
          CaseRun cr;
          cr.init(e);
          std::vector<std::vector<float>> cpu_in, cpu_out, cpu_w;
          std::vector<memra_tensor> cin, cout, gin, gout;
          std::vector<memra_weight> cw;
          std::vector<const memra_weight*> gw;
          auto shape = [](const int64_t* s, int32_t i) { return std::vector<int64_t>{s[2 * i], s[2 * i + 1]}; };
          auto host_tensor = [](std::vector<float>& v, const std::vector<int64_t>& s) {
            memra_tensor t{};
            t.struct_size = MEMRA_TENSOR_STRUCT_SIZE;
            t.dtype = MEMRA_DTYPE_F32;
            t.ndim = 2;
            t.shape[0] = s[0], t.shape[1] = s[1];
            t.data = v.data();
            return t;
          };
          for (int32_t i = 0; i < e.num_inputs; ++i) {
            const auto s = shape(e.input_shapes, i);
            cpu_in.emplace_back(e.inputs[i], e.inputs[i] + s[0] * s[1]);
          }
          for (int32_t i = 0; i < e.num_outputs; ++i) {
            const auto s = shape(e.output_shapes, i);
            cpu_out.emplace_back(static_cast<size_t>(s[0] * s[1]), 0.0f);
          }
          for (int32_t i = 0; i < e.num_weights; ++i) {
            const auto s = shape(e.weight_shapes, i);
            cpu_w.emplace_back(e.weights[i], e.weights[i] + s[0] * s[1]);
            memra_weight w{};
            w.struct_size = MEMRA_WEIGHT_STRUCT_SIZE;
            w.name = "op weight";
            w.quant = "f32";
            w.dtype = MEMRA_DTYPE_F32;
            w.ndim = 2;
            w.shape[0] = s[0], w.shape[1] = s[1];
            w.bytes = cpu_w.back().size() * sizeof(float);
            w.data = cpu_w.back().data();
            cw.push_back(w);
            std::vector<uint8_t> bytes(w.bytes);
            std::memcpy(bytes.data(), w.data, w.bytes);
            gw.push_back(d.weight(name + " weight " + std::to_string(i), "f32", MEMRA_DTYPE_F32, s, std::move(bytes)));
          }
          std::string bad;
          auto differs = [&](const std::vector<float>& got, const std::vector<float>& want) {
            if (got.size() != want.size()) return true;
            for (size_t k = 0; k < got.size(); ++k) {
              if (e.tolerance == 0.0f ? std::memcmp(&got[k], &want[k], sizeof(float)) != 0
                                      : !(std::fabs(got[k] - want[k]) <= e.tolerance * (1.0f + std::fabs(want[k]))))
                return true;
            }
            return false;
          };
          for (int call = 0; call < 3; ++call) {
            if (call == 2 && e.state_bytes) {  // a fork over the last slot, a fresh first slot
              const int32_t last = std::max(1, e.num_seqs) - 1;
              d.check(cpu.copy_state_slot(0, last), "CPU copy_state_slot");
              d.check(d.backend().copy_state_slot(0, last), "copy_state_slot");
              d.check(cpu.reset_state_slot(0), "CPU reset_state_slot");
              d.check(d.backend().reset_state_slot(0), "reset_state_slot");
            }
            cin.clear(), cout.clear(), gin.clear(), gout.clear();
            for (int32_t i = 0; i < e.num_inputs; ++i) cin.push_back(host_tensor(cpu_in[static_cast<size_t>(i)], shape(e.input_shapes, i)));
            for (int32_t i = 0; i < e.num_outputs; ++i) cout.push_back(host_tensor(cpu_out[static_cast<size_t>(i)], shape(e.output_shapes, i)));
            d.begin_step();
            for (int32_t i = 0; i < e.num_inputs; ++i) gin.push_back(d.upload(cpu_in[static_cast<size_t>(i)], shape(e.input_shapes, i)));
            for (int32_t i = 0; i < e.num_outputs; ++i) gout.push_back(d.tensor(shape(e.output_shapes, i)));
            std::vector<const memra_tensor*> ci, gi;
            std::vector<memra_tensor*> co, go;
            std::vector<const memra_weight*> cwp;
            for (auto& t : cin) ci.push_back(&t);
            for (auto& t : cout) co.push_back(&t);
            for (auto& t : gin) gi.push_back(&t);
            for (auto& t : gout) go.push_back(&t);
            for (auto& w : cw) cwp.push_back(&w);
            memra_forward_batch b = cr.batch;
            auto with_version = [&](const memra_backend_ops& ops, const memra_op* h, std::vector<const memra_tensor*> in,
                                    std::vector<memra_tensor*> out, std::vector<const memra_weight*> w) {
              memra_op_args a{};
              a.struct_size = MEMRA_OP_ARGS_STRUCT_SIZE;
              a.layer = 0;
              a.attrs_version = op.def->version;
              a.attrs = e.attrs;
              a.attrs_size = e.attrs_size;
              a.num_inputs = static_cast<int32_t>(in.size());
              a.num_outputs = static_cast<int32_t>(out.size());
              a.inputs = in.data();
              a.outputs = out.data();
              a.num_weights = static_cast<int32_t>(w.size());
              a.weights = w.data();
              a.batch = &b;
              return ops.op_run(ops.ctx, h, &a);
            };
            if (with_version(*cpu.ops(), cpu_op, ci, co, cwp) != MEMRA_OK) throw Failure("CPU op_run: " + cpu.last_error());
            d.check(with_version(d.ops(), gpu_op, gi, go, gw), "op_run");
            for (int32_t i = 0; i < e.num_outputs; ++i)
              if (differs(d.download(gout[static_cast<size_t>(i)]), cpu_out[static_cast<size_t>(i)]))
                bad += " call " + std::to_string(call + 1) + " output " + std::to_string(i);
          }
          r.add(name, bad.empty(),
                bad.empty() ? std::string("3 calls (state carried, forked, zeroed) ") + (e.tolerance == 0.0f ? "bitwise equal" : "within tolerance")
                            : "differs at" + bad);
        });
      }
    }
  }
}

}  // namespace memra::kcheck
