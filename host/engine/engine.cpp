#include "host/engine/engine.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/human_bytes.hpp"
#include "host/backend/pipeline/pipeline_build.hpp"
#include "host/backend/plugin_kernels.hpp"
#include "host/ops/op_registry.hpp"
#include "kernels/sampling/sampling_ref.hpp"

namespace memra::engine {
namespace {
// Blocks a sequence of `tokens` tokens holds at most in each pool of these windows: all
// of its blocks in a full pool; in a sliding pool, the window before a step, the
// rollback margin (`step` positions, Engine::drop_window_blocks) and the step's own
// `step` tokens span window + 2 * step - 1 positions, so at most (span - 1) / block + 2.
// The state the plan's groups ask for: each PAGED_KV group's layers get its KV geometry
// and dtype and a KV pool by window (full-attention layers share pool 0, each sliding
// window size its own pool, which keeps only the window: every layer of a pool shares
// its block tables); RECURRENT groups give each of their layers bytes_per_sequence per
// sequence and no KV. Anything else is refused by name, never guessed.
struct PlanState {
  backend::KvCacheConfig kv;
  std::vector<int64_t> pool_window;   // per KV pool: its window (0: full attention first)
  std::vector<uint64_t> state_bytes;  // per model layer: recurrent bytes per sequence (0: none)
  bool recurrent = false;
  std::vector<memra_op_requirement> required_ops;
  bool layer_ranges = false;  // the family runs layer ranges (pipeline stages, ABI 2.2)
  int64_t hidden_width = 0;   // the family returns final hidden states this wide (ABI 2.3), 0: none
  int32_t draft_layers = 0;   // a draft head's layers after the model's (ABI 2.9)
};

// `draft_head`: allocate the draft head's layers' state (EngineOptions::draft_head).
Result<PlanState> state_from_plan(const plugins::ModelPlan& plan, const ModelConfig& c, memra_dtype default_kv_dtype,
                                  bool draft_head) {
  auto info = plan.info();
  if (!info) return info.error();
  const std::string who = "family plugin '" + plan.plugin_name() + "'";
  if (info->num_layers != c.num_layers || info->vocab_size != c.vocab_size)
    return make_error(ErrorCode::invalid_argument, who + " planned " + std::to_string(info->num_layers) + " layers and vocab " +
                                                       std::to_string(info->vocab_size) + " for a config of " +
                                                       std::to_string(c.num_layers) + " layers and vocab " + std::to_string(c.vocab_size));
  if ((info->inputs & MEMRA_INPUT_TOKEN_IDS) == 0 || (info->inputs & ~MEMRA_INPUT_TOKEN_IDS) != 0 || info->num_encoders != 0)
    return make_error(ErrorCode::unsupported, who + "'s plan takes inputs or encoders the engine cannot feed yet (token ids only)");
  PlanState ps;
  if (MEMRA_STRUCT_HAS(&*info, memra_plan_info, draft_layers)) {
    if (info->draft_layers < 0 || info->draft_layers > 4)
      return make_error(ErrorCode::invalid_argument, who + " declares " + std::to_string(info->draft_layers) + " draft layers (0..4)");
    ps.draft_layers = info->draft_layers;
  }
  const int32_t all_layers = std::max(0, info->num_layers) + ps.draft_layers;
  std::vector<int> seen(static_cast<size_t>(all_layers), 0);
  backend::KvCacheConfig& kv = ps.kv;
  kv.layers.assign(seen.size(), backend::KvLayerConfig{});
  ps.state_bytes.assign(seen.size(), 0);
  for (size_t g = 0; g < info->num_state_groups; ++g) {
    const memra_state_group& group = info->state_groups[g];
    const std::string where = who + " state group " + std::to_string(g);
    if (!MEMRA_STRUCT_HAS(&group, memra_state_group, layout))
      return make_error(ErrorCode::invalid_argument, where + " has struct_size " + std::to_string(group.struct_size) + ", too small");
    if (group.kind == MEMRA_STATE_RECURRENT) {
      if (group.bytes_per_sequence == 0 || group.bytes_per_sequence % 4 != 0 || !group.layout)
        return make_error(ErrorCode::invalid_argument, where + " is RECURRENT with no layout or a size that is 0 or not a multiple of 4 bytes");
      ps.recurrent = true;
    } else if (group.kind == MEMRA_STATE_PAGED_KV) {
      if (group.kv_heads <= 0 || group.head_dim <= 0 || group.sliding_window < 0)
        return make_error(ErrorCode::invalid_argument, where + " has a non-positive KV geometry");
    } else {
      return make_error(ErrorCode::unsupported, where + " declares unknown state kind " + std::to_string(group.kind));
    }
    for (int32_t i = 0; i < group.num_layers; ++i) {
      const int32_t l = group.layers[i];
      if (l < 0 || l >= all_layers || seen[static_cast<size_t>(l)]++)
        return make_error(ErrorCode::invalid_argument, where + " lists layer " + std::to_string(l) + " out of range or twice");
      if (l >= info->num_layers) {  // a draft head's layer: KV only, and only when it drafts
        if (group.kind != MEMRA_STATE_PAGED_KV || group.sliding_window != 0)
          return make_error(ErrorCode::unsupported, where + " gives draft-head layer " + std::to_string(l) +
                                                        " state other than full-attention KV");
        if (!draft_head) continue;
      }
      if (group.kind == MEMRA_STATE_RECURRENT) ps.state_bytes[static_cast<size_t>(l)] = group.bytes_per_sequence;
      else  // the family's dtype when it declares one, else the engine's (--kv-dtype)
        kv.layers[static_cast<size_t>(l)] = {group.kv_heads, group.head_dim,
                                             group.kv_dtype != MEMRA_DTYPE_INVALID ? group.kv_dtype : default_kv_dtype, 0,
                                             group.sliding_window};
    }
  }
  // Pools: full attention (window 0) first, then the windows in increasing size; a model
  // without KV layers keeps one (empty) pool for its sequences' bookkeeping.
  std::set<int64_t> windows;
  for (const backend::KvLayerConfig& l : kv.layers)
    if (l.kv_heads > 0) windows.insert(l.window);
  if (windows.empty()) windows.insert(0);
  ps.pool_window.assign(windows.begin(), windows.end());
  for (backend::KvLayerConfig& l : kv.layers)
    l.pool = static_cast<int32_t>(std::find(ps.pool_window.begin(), ps.pool_window.end(), l.window) - ps.pool_window.begin());
  for (size_t l = 0; l < seen.size(); ++l)
    if (!seen[l]) return make_error(ErrorCode::invalid_argument, who + "'s plan gives layer " + std::to_string(l) + " no state group");
  if (MEMRA_STRUCT_HAS(&*info, memra_plan_info, required_ops) && info->num_required_ops > 0) {
    if (!info->required_ops) return make_error(ErrorCode::invalid_argument, who + " lists required ops but no array");
    ps.required_ops.assign(info->required_ops, info->required_ops + info->num_required_ops);
  }
  ps.layer_ranges = MEMRA_STRUCT_HAS(&*info, memra_plan_info, layer_ranges) && info->layer_ranges == 1;
  if (MEMRA_STRUCT_HAS(&*info, memra_plan_info, hidden_width)) {
    if (info->hidden_width < 0) return make_error(ErrorCode::invalid_argument, who + " declares a negative hidden_width");
    ps.hidden_width = info->hidden_width;
  }
  return ps;
}

}  // namespace

std::string plan_draft_head_missing(const plugins::ModelPlan& plan) {
  auto d = plan.describe();
  if (!d) return {};
  const auto j = nlohmann::json::parse(*d, nullptr, false);
  return j.is_object() && j.contains("draft_head_missing") && j["draft_head_missing"].is_string()
             ? j["draft_head_missing"].get<std::string>()
             : std::string();
}

Engine::Engine(std::unique_ptr<ModelSource> source, int64_t vocab, int64_t max_context, int64_t block_size,
               const std::vector<int64_t>& pool_blocks, std::vector<int64_t> pool_window, int64_t max_step_tokens)
    : source_(std::move(source)),
      vocab_(vocab),
      max_context_(max_context),
      block_size_(block_size),
      pools_(pool_blocks.begin(), pool_blocks.end()),
      pool_window_(std::move(pool_window)),
      max_step_tokens_(max_step_tokens),
      prefix_cache_(pools_[0], block_size) {}

std::vector<int64_t> Engine::kv_blocks_for(int64_t tokens) const {
  return blocks_per_sequence(pool_window_, tokens, max_step_tokens_, block_size_);
}

Engine::~Engine() {
  // The model references the backend's op table and the source's weights: drop it first.
  models_.clear();
  plan_.reset();
}

Result<std::unique_ptr<Engine>> Engine::create(std::unique_ptr<ModelSource> source, const plugins::PluginHost& plugins,
                                               const EngineOptions& options) {
  const ModelConfig& c = source->config;
  // The plugin that normalised the config plans it (by name: a .memra repack records it).
  auto family = plugins.family(c.family);
  if (!family)
    return make_error(family.error().code, "cannot load " + source->path + ": its config was normalised by family plugin '" +
                                               c.family + "', which is not installed (see memra-host --list-plugins)");
  auto plan = family->plan_create(source->config_json);
  if (!plan) return make_error(plan.error().code, "cannot load " + source->path + ": " + plan.error().message);
  auto state = state_from_plan(*plan, c, options.kv_dtype, options.draft_head);
  if (!state) return make_error(state.error().code, "cannot load " + source->path + ": " + state.error().message);
  // Ops by name: refused here, before any device is opened, on a backend that lacks
  // them (host/ops/op_registry.hpp says which backend has which op).
  std::vector<ops::PluginOp> plugin_ops;
  for (const memra_op_def& d : family->ops()) plugin_ops.push_back({&d, family->ctx(), family->info().name});
  if (const std::string why = ops::check_required_ops(plan->plugin_name(), state->required_ops, options.backend.kind, plugin_ops);
      !why.empty())
    return make_error(ErrorCode::unsupported, "cannot load " + source->path + ": " + why);

  // Planned (EngineOptions::plan_memory): a probe of one sequence of one step's tokens first,
  // then the plan's sizes once the weights are up and a dry step has run.
  const bool planning = options.plan_memory && options.pipeline_stages <= 1;
  const int64_t positions = c.max_position_embeddings > 0 ? c.max_position_embeddings : 4096;
  const int64_t bs = std::max<int64_t>(1, options.block_size);
  const int64_t max_step = std::max<int64_t>(1, options.max_step_tokens);
  int64_t max_context = options.max_context > 0 ? options.max_context : std::min<int64_t>(positions, 4096);
  int64_t sequences = std::max<int64_t>(1, options.max_sequences);
  // Unplanned, kv_cache_tokens sizes the cache in whole contexts (rounded up).
  if (options.kv_cache_tokens > 0) sequences = std::max<int64_t>(1, (options.kv_cache_tokens + max_context - 1) / max_context);
  if (planning) {
    max_context = (std::min(max_step, options.max_context > 0 ? options.max_context : positions) + bs - 1) / bs * bs;
    sequences = 1;
  }
  std::vector<int64_t> pool_blocks = blocks_per_sequence(state->pool_window, max_context, max_step, bs);
  for (int64_t& n : pool_blocks) n *= sequences;

  std::unique_ptr<Engine> e(new Engine(std::move(source), c.vocab_size, max_context, bs, pool_blocks, state->pool_window, max_step));
  e->hidden_width_ = state->hidden_width;
  e->draft_layers_ = state->draft_layers;
  e->draft_head_ = options.draft_head && state->draft_layers > 0 && state->hidden_width > 0;
  if (state->draft_layers == 0) e->draft_missing_ = plan_draft_head_missing(*plan);
  if (e->draft_head_ && options.pipeline_stages > 1)
    return make_error(ErrorCode::unsupported, "cannot load " + e->source_->path + ": a draft head (MTP) does not run in pipeline stages yet");
  const std::string& path = e->source_->path;
  for (const backend::KvLayerConfig& l : state->kv.layers)
    if (l.kv_heads > 0) e->kv_token_bytes_ += 2 * static_cast<uint64_t>(l.kv_heads) * backend::kv_row_bytes(l.dtype, l.head_dim);
  // A cached prefix keeps every pool's blocks; a sliding pool's only those its window still
  // reads (PrefixCache::set_pools).
  e->prefix_cache_.set_pools(e->pools_, e->pool_window_);
  // Recurrent state: a live and a snapshot slot per sequence the cache is sized for,
  // allocated with the KV cache (docs/ARCHITECTURE.md, "State manager"), and the prefix
  // cache's snapshots of it (cached KV blocks alone carry no recurrent state).
  int64_t per_sequence = 0;  // state slots
  if (state->recurrent) {
    // Row snapshots when every state op of the plan writes them (MEMRA_OP_SNAPSHOTS).
    bool rows_ok = options.state_snapshot_rows > 0;
    for (const memra_op_requirement& r : state->required_ops)
      for (const ops::PluginOp& op : plugin_ops)
        if (std::string_view(op.def->name) == r.name && (op.def->flags & MEMRA_OP_USES_STATE) && !(op.def->flags & MEMRA_OP_SNAPSHOTS))
          rows_ok = false;
    e->row_snapshots_ = rows_ok ? options.state_snapshot_rows : 0;
    // Slots [0, (2 + rows) x sequences) are the sequences' (live, before the step, rows),
    // the rest the cache's.
    per_sequence = 2 + e->row_snapshots_;
    const int64_t interval = options.prefix_state_interval < 0 ? max_step : options.prefix_state_interval;
    e->state_interval_ = interval / bs * bs;
  }
  // The caches for `seqs` sequences of `context` tokens, the KV pools `blocks`.
  auto size_caches = [&](int64_t context, int64_t seqs, const std::vector<int64_t>& blocks) {
    backend::StateConfig sc;
    sc.kv = state->kv;
    sc.kv.block_size = bs;
    sc.kv.pool_blocks = blocks;
    e->max_context_ = context;
    for (size_t p = 0; p < blocks.size(); ++p) e->pools_[p] = KvBlockAllocator(static_cast<int32_t>(blocks[p]));
    e->kv_bytes_ = 2 * sc.kv.bytes();
    if (state->recurrent) {
      const int64_t snapshots = options.prefix_state_snapshots < 0 ? seqs : options.prefix_state_snapshots;
      sc.recurrent.slots = per_sequence * seqs + snapshots;
      sc.recurrent.layer_bytes = state->state_bytes;
      e->state_slots_ = KvBlockAllocator(static_cast<int32_t>(per_sequence * seqs));
      e->cache_states_ = KvBlockAllocator(static_cast<int32_t>(snapshots));
      e->state_bytes_ = sc.recurrent.bytes();
      if (snapshots == 0) e->prefix_cache_.disable();
      else e->prefix_cache_.require_state(e->cache_states_, static_cast<int32_t>(snapshots));
    }
    return sc;
  };
  backend::StateConfig sc = size_caches(max_context, sequences, pool_blocks);

  // The backend opens first: quant plugins are scored against the device they will run on.
  Engine* self = e.get();
  backend::BackendOptions bo = options.backend;
  bo.quant_lookup = [self](const char* scheme) -> backend::QuantTable {
    auto it = self->quant_tables_.find(scheme);
    return it == self->quant_tables_.end() ? backend::QuantTable{} : it->second;
  };
  if (options.pipeline_stages > 1) {
    // Stage backends, each running the model over its layer range (pipeline_backend.hpp).
    if (!state->layer_ranges)
      return make_error(ErrorCode::unsupported, "cannot load " + path + " as a " + std::to_string(options.pipeline_stages) +
                                                    "-stage pipeline: family plugin '" + plan->plugin_name() +
                                                    "' does not run layer ranges (memra_plan_info.layer_ranges, ABI 2.2)");
    backend::PipelineOptions po;
    po.stages = options.pipeline_stages;
    po.split = options.pipeline_split;
    po.devices = options.pipeline_devices;
    po.stage = bo;
    po.kv = sc.kv;
    auto p = backend::make_pipeline_backend(e->source_->weights, po);
    if (!p)
      return make_error(p.error().code, "cannot load " + path + " as a " + std::to_string(options.pipeline_stages) +
                                            "-stage pipeline: " + p.error().message);
    e->backend_ = std::move(*p);
  } else {
    auto b = backend::open_backend(bo);
    if (!b) return make_error(b.error().code, "cannot load " + path + ": " + b.error().message);
    e->backend_ = std::move(*b);
  }
  backend::Backend& backend = *e->backend_;
  const memra_device_info device = backend.device_info();
  std::set<std::string> schemes;
  for (const memra_weight& w : e->source_->weights) schemes.insert(w.quant);
  for (const std::string& s : schemes) {
    auto q = plugins.quant_for(s, device);
    if (!q) return make_error(q.error().code, "cannot load " + path + ": weights use quant scheme '" + s + "' but " + q.error().message);
    // The plugin vouches for its layout's size (a .memra reader cannot for a plugin scheme).
    for (const memra_weight& w : e->source_->weights) {
      if (w.quant != s || w.ndim < 2 || w.ndim > 4) continue;
      int64_t rows = 1;  // a stacked [n][rows][cols] tensor is n * rows rows
      for (int32_t d = 0; d + 1 < w.ndim; ++d) rows *= w.shape[d];
      auto b = q->weight_bytes(s, rows, w.shape[w.ndim - 1]);
      if (!b || *b > w.bytes)
        return make_error(ErrorCode::invalid_argument, "cannot load " + path + ": weight " + (w.name ? w.name : "?") + " (" + s +
                                                           ") " + (b ? "holds fewer bytes than plugin '" + q->info().name + "' needs"
                                                                     : "does not fit plugin '" + q->info().name + "': " + b.error().message));
    }
    e->quant_tables_[s] = {&q->api(), q->ctx()};
    e->quant_plugins_.push_back(std::move(*q));
  }
  // Plugins' kernels join the backend's registry before the weights go up (upload
  // refuses a scheme without a kernel); a refused plugin is one log line each.
  for (const std::string& line : backend::register_plugin_kernels(backend, e->quant_plugins_))
    std::fprintf(stderr, "memra: %s\n", line.c_str());
  // The family plugin's own ops (each CUDA form prepared on its device); a required one
  // the backend cannot run refuses the model, naming the op and why.
  e->plugin_ops_ = std::move(plugin_ops);
  std::vector<std::string> refused_ops = backend::register_plugin_ops(backend, e->plugin_ops_);
  for (const memra_op_requirement& r : state->required_ops)
    for (const memra_backend_ops* table : backend.op_tables()) {
      const memra_op* handle = nullptr;
      if (table->op_find(table->ctx, r.name, r.version, &handle) == MEMRA_OK) continue;
      std::string why = backend.last_error();
      for (const std::string& line : refused_ops)
        if (line.find("'" + std::string(r.name) + "'") != std::string::npos) why = line;
      return make_error(ErrorCode::unsupported, "cannot load " + path + ": family plugin '" + family->info().name + "' requires op '" +
                                                    r.name + "' v" + std::to_string(r.version) + ", which " + backend.name() +
                                                    " cannot run: " + why);
    }
  const memra_weight_set set = e->source_->weight_set();
  if (auto st = backend.upload_weights(set); !st) return make_error(st.error().code, "cannot load " + path + ": " + st.error().message);

  e->plan_ = std::make_unique<plugins::ModelPlan>(std::move(*plan));
  // One model per op table: a pipeline's stages each run theirs over their layers.
  for (const memra_backend_ops* ops : backend.op_tables()) {
    auto model = e->plan_->create_model(set, ops);
    if (!model) return make_error(model.error().code, "cannot load " + path + ": " + model.error().message);
    e->models_.push_back(std::make_unique<plugins::Model>(std::move(*model)));
  }
  // Only once the weights are known to fit the plan.
  if (auto st = backend.allocate_state(sc); !st) {
    std::string why = st.error().message;
    if (state->recurrent && st.error().code == ErrorCode::unsupported)
      why = "family plugin '" + e->plan_->plugin_name() + "' needs RECURRENT state: " + why;
    return make_error(st.error().code, "cannot load " + path + ": " + why);
  }
  if (!planning) return e;

  // The memory plan: a dry step of one step's prompt tokens on the probe measures the
  // workspace, then the caches take what the device has left (memory_plan.hpp).
  const backend::MemoryInfo before = backend.memory_info();
  if (before.total == 0) return make_error(ErrorCode::unsupported, "cannot load " + path + ": " + backend.name() +
                                                                          " does not report its memory; set --max-context");
  if (before.device) {  // the CPU backend's scratch is host memory that comes and goes: nothing to measure
    const int32_t seq = e->open_sequence();
    if (seq < 0) return make_error(ErrorCode::internal, "cannot load " + path + ": the dry step found no sequence slot");
    std::vector<int32_t> tokens(static_cast<size_t>(std::min(max_step, max_context)), 0);
    StepRequest r;
    r.seq = seq;
    r.tokens = tokens;
    r.prompt = true;
    auto dry = e->step(std::span<const StepRequest>(&r, 1));
    e->close_sequence(seq);
    if (!dry) return make_error(dry.error().code, "cannot load " + path + ": the dry step of " + std::to_string(tokens.size()) +
                                                      " tokens failed: " + dry.error().message);
  }
  const backend::MemoryInfo after = backend.memory_info();
  MemoryPlanInput in;
  in.device = std::string(device.name ? device.name : "?") + " (" + backend.name() + ")";
  in.total = after.total;
  in.free = after.free;
  in.probe_state = e->kv_bytes_ + e->state_bytes_;
  for (const memra_weight& w : e->source_->weights) in.weights += w.bytes;
  in.workspace = after.device && before.free > after.free ? before.free - after.free : 0;
  // Decode graphs (one per batch size captured) and the driver's growth: 1 % of the device.
  in.reserve = after.device ? after.total / 100 : 0;
  in.fraction = options.memory_fraction;
  in.model_positions = c.max_position_embeddings;
  in.max_context = options.max_context;
  in.kv_cache_tokens = options.kv_cache_tokens;
  in.sequences = std::max<int64_t>(1, options.max_sequences);
  in.block_size = bs;
  in.max_step = max_step;
  in.pool_window = state->pool_window;
  for (size_t p = 0; p < state->pool_window.size(); ++p) {
    backend::KvCacheConfig one = state->kv;
    one.pool_blocks.assign(state->pool_window.size(), 0);
    one.pool_blocks[p] = 1;
    one.block_size = bs;
    in.pool_block_bytes.push_back(2 * one.bytes());
  }
  if (state->recurrent) {
    for (uint64_t b : state->state_bytes) in.state_slot_bytes += b;
    in.state_slots_per_sequence = per_sequence + (options.prefix_state_snapshots < 0 ? 1 : 0);
    in.state_fixed_slots = std::max<int64_t>(0, options.prefix_state_snapshots);
  }
  auto mp = plan_memory(in);
  if (!mp) return make_error(mp.error().code, "cannot load " + path + ": " + mp.error().message);
  sc = size_caches(mp->context, mp->sequences, mp->pool_blocks);
  if (auto st = backend.allocate_state(sc); !st)
    return make_error(st.error().code, "cannot load " + path + ": the planned KV cache and state (" +
                                           human_bytes(e->kv_bytes_ + e->state_bytes_) + ") did not fit: " + st.error().message +
                                           "; lower --gpu-memory-fraction or --max-context");
  e->memory_plan_ = std::make_unique<MemoryPlan>(std::move(*mp));
  return e;
}

int32_t Engine::open_sequence() { return open_sequence(std::vector<int32_t>{}); }

int32_t Engine::open_sequence(std::vector<int32_t> prefix_blocks, int32_t state_slot, std::vector<std::vector<int32_t>> pool_blocks) {
  auto refuse = [&] {
    for (int32_t b : prefix_blocks)
      if (b >= 0) pools_[0].release(b);
    for (size_t p = 0; p < pool_blocks.size() && p + 1 < pools_.size(); ++p)
      for (int32_t b : pool_blocks[p])
        if (b >= 0) pools_[p + 1].release(b);
    return -1;
  };
  // A prefix covers every pool: the other pools' tables as long as pool 0's.
  if (!prefix_blocks.empty() && pools_.size() > 1) {
    if (pool_blocks.size() != pools_.size() - 1) return refuse();
    for (const auto& b : pool_blocks)
      if (b.size() != prefix_blocks.size()) return refuse();
  }
  Sequence s;
  if (has_recurrent_state()) {
    // A live and a snapshot slot, or no sequence (can_open_sequence() said so first),
    // starting from zero or from the prefix cache's snapshot.
    if (!prefix_blocks.empty() && state_slot < 0) return refuse();
    auto live = state_slots_.allocate();
    auto snap = live ? state_slots_.allocate() : std::nullopt;
    std::vector<int32_t> rows;
    for (int64_t i = 0; snap && i < row_snapshots_; ++i)
      if (auto r = state_slots_.allocate()) rows.push_back(*r);
    const bool ready = snap && static_cast<int64_t>(rows.size()) == row_snapshots_ &&
                       (state_slot >= 0 ? static_cast<bool>(copy_state_slot(cache_state_base() + state_slot, *live))
                                        : static_cast<bool>(reset_state_slot(*live)));
    if (!ready) {
      if (live) state_slots_.release(*live);
      if (snap) state_slots_.release(*snap);
      for (int32_t r : rows) state_slots_.release(r);
      return refuse();
    }
    s.state_slot = *live;
    s.snapshot_slot = *snap;
    s.row_slots = std::move(rows);
  }
  const int32_t id = next_seq_++;
  s.length = static_cast<int64_t>(prefix_blocks.size()) * block_size_;
  s.blocks.resize(pools_.size());
  s.blocks[0] = std::move(prefix_blocks);
  if (!s.blocks[0].empty())
    for (size_t p = 1; p < pools_.size(); ++p) s.blocks[p] = std::move(pool_blocks[p - 1]);
  sequences_[id] = std::move(s);
  return id;
}

bool Engine::can_open_sequence() const { return !has_recurrent_state() || state_slots_.num_free() >= 2 + row_snapshots_; }

int64_t Engine::next_prefix_cache_point(int64_t prompt_tokens, int64_t done) const {
  if (!prefix_cache_.enabled()) return 0;
  if (!prefix_cache_.requires_state()) return done < prompt_tokens ? prompt_tokens : 0;
  const int64_t last = prompt_tokens / block_size_ * block_size_;
  if (done >= last) return 0;
  if (state_interval_ > 0) return std::min(last, (done / state_interval_ + 1) * state_interval_);
  return last;
}

int64_t Engine::cache_prefix(const std::string& ns, std::span<const int32_t> tokens, int32_t seq) {
  if (!prefix_cache_.enabled()) return 0;
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return 0;
  const Sequence& s = it->second;
  int32_t state = -1;
  if (prefix_cache_.requires_state()) {
    if (s.length != static_cast<int64_t>(tokens.size()) || tokens.empty() || tokens.size() % static_cast<size_t>(block_size_) != 0)
      return 0;  // the state is known only where the sequence stands, at a block's end
    auto slot = cache_states_.allocate();
    while (!slot && prefix_cache_.evict_state()) slot = cache_states_.allocate();
    if (!slot) return 0;
    if (!copy_state_slot(s.state_slot, cache_state_base() + *slot)) {
      cache_states_.release(*slot);
      return 0;
    }
    state = *slot;
  }
  return prefix_cache_.insert_pools(ns, tokens, s.blocks, state) * block_size_;
}

const std::vector<int32_t>& Engine::sequence_blocks(int32_t seq, int32_t pool) const {
  static const std::vector<int32_t> kNone;
  auto it = sequences_.find(seq);
  return it == sequences_.end() || pool < 0 || pool >= num_kv_pools() ? kNone : it->second.blocks[static_cast<size_t>(pool)];
}

void Engine::release_blocks_from(Sequence& s, size_t keep) {
  for (size_t p = 0; p < s.blocks.size(); ++p)
    while (s.blocks[p].size() > keep) {
      if (s.blocks[p].back() >= 0) pools_[p].release(s.blocks[p].back());
      s.blocks[p].pop_back();
    }
}

void Engine::drop_window_blocks(Sequence& s, int64_t position) {
  for (size_t p = 0; p < s.blocks.size(); ++p) {
    const int64_t w = pool_window_[p];
    if (w <= 0) continue;
    // The first position a token at `position` or later reads is position - w + 1; a
    // rollback of up to max_step_tokens positions (a draft model's drafts) may still
    // read max_step_tokens before it.
    const auto first = static_cast<size_t>(std::max<int64_t>(0, position - w + 1 - max_step_tokens_) / block_size_);
    for (size_t b = 0; b < std::min(first, s.blocks[p].size()); ++b)
      if (s.blocks[p][b] >= 0) {
        pools_[p].release(s.blocks[p][b]);
        s.blocks[p][b] = -1;
      }
  }
}

void Engine::close_sequence(int32_t seq) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return;
  release_blocks_from(it->second, 0);
  if (it->second.state_slot >= 0) state_slots_.release(it->second.state_slot);
  if (it->second.snapshot_slot >= 0) state_slots_.release(it->second.snapshot_slot);
  for (int32_t r : it->second.row_slots) state_slots_.release(r);
  sequences_.erase(it);
}

int64_t Engine::sequence_length(int32_t seq) const {
  auto it = sequences_.find(seq);
  return it == sequences_.end() ? -1 : it->second.length;
}

Result<int32_t> Engine::fork_sequence(int32_t seq) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return make_error(ErrorCode::not_found, "fork_sequence: no such sequence");
  if (!can_open_sequence()) return make_error(ErrorCode::conflict, "fork_sequence: no free recurrent-state slots");
  // Every block copied, not shared: either side may later roll back into and rewrite a
  // block. Blocks a sliding pool dropped stay dropped.
  Sequence copy;
  copy.blocks.resize(pools_.size());
  auto give_back = [&] { release_blocks_from(copy, 0); };
  for (size_t p = 0; p < pools_.size(); ++p)
    for (int32_t from : it->second.blocks[p]) {
      if (from < 0) {
        copy.blocks[p].push_back(-1);
        continue;
      }
      auto b = pools_[p].allocate();
      while (!b && prefix_cache_.evict_one(static_cast<int32_t>(p))) b = pools_[p].allocate();
      if (!b) {
        give_back();
        return make_error(ErrorCode::conflict, "fork_sequence: KV cache is full");
      }
      copy.blocks[p].push_back(*b);
      if (Status st = copy_kv_block(static_cast<int32_t>(p), from, *b); !st) {
        give_back();
        return st.error();
      }
    }
  const int64_t length = it->second.length;
  const int32_t id = open_sequence(std::vector<int32_t>{});
  if (id < 0) {
    give_back();
    return make_error(ErrorCode::conflict, "fork_sequence: no free recurrent-state slots");
  }
  Sequence& from = sequences_[seq];
  Sequence& to = sequences_[id];
  to.length = length;
  to.blocks = std::move(copy.blocks);
  if (has_recurrent_state()) {
    // The state (live and snapshot) and what replays the snapshot: the fork can roll back too.
    if (Status st = copy_state_slot(from.state_slot, to.state_slot); !st) return st.error();
    if (Status st = copy_state_slot(from.snapshot_slot, to.snapshot_slot); !st) return st.error();
    to.snapshot_length = from.snapshot_length;
    to.since_snapshot = from.since_snapshot;
    to.since_snapshot_prompt = from.since_snapshot_prompt;
    for (int64_t i = 0; i < from.rows_snapshotted; ++i)
      if (Status st = copy_state_slot(from.row_slots[static_cast<size_t>(i)], to.row_slots[static_cast<size_t>(i)]); !st) return st.error();
    to.rows_snapshotted = from.rows_snapshotted;
  }
  return id;
}

Status Engine::truncate_sequence(int32_t seq, int64_t new_length) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return make_error(ErrorCode::not_found, "no such sequence");
  Sequence& s = it->second;
  if (new_length < 0 || new_length > s.length) return make_error(ErrorCode::invalid_argument, "truncate beyond the sequence");
  if (new_length == s.length) return {};
  // Recurrent state cannot be trimmed: restore the snapshot taken before the last step,
  // then replay the kept tokens of that step (the contract in docs/ARCHITECTURE.md).
  if (has_recurrent_state() && (s.snapshot_length < 0 || new_length < s.snapshot_length))
    return make_error(ErrorCode::invalid_argument, "truncate_sequence: a sequence with recurrent state rolls back only within its last step "
                                                   "(to a length of at least " + std::to_string(std::max<int64_t>(s.snapshot_length, 0)) + ")");
  // A sliding pool's next step reads from new_length - window + 1: its block must be kept.
  for (size_t p = 0; p < pools_.size(); ++p) {
    const int64_t w = pool_window_[p];
    const auto b = static_cast<size_t>(std::max<int64_t>(0, new_length - w + 1) / block_size_);
    if (w > 0 && b < s.blocks[p].size() && s.blocks[p][b] < 0)
      return make_error(ErrorCode::invalid_argument, "truncate_sequence: the sliding window of " + std::to_string(w) +
                                                         " positions already dropped the KV a length of " + std::to_string(new_length) +
                                                         " needs (roll back only within the last step)");
  }
  release_blocks_from(s, static_cast<size_t>((new_length + block_size_ - 1) / block_size_));
  if (!has_recurrent_state()) {
    s.length = new_length;
    return {};
  }
  // The step kept a snapshot of the row new_length ends at: copy it back, no replay.
  if (const int64_t row = new_length - s.snapshot_length - 1; row >= 0 && row < s.rows_snapshotted) {
    if (Status st = copy_state_slot(s.row_slots[static_cast<size_t>(row)], s.state_slot); !st) return st.error();
    s.length = new_length;
    s.since_snapshot.resize(static_cast<size_t>(new_length - s.snapshot_length));
    s.rows_snapshotted = row;  // later rows lie past the new length
    ++row_restores_;
    return {};
  }
  if (Status st = copy_state_slot(s.snapshot_slot, s.state_slot); !st) return st.error();
  s.rows_snapshotted = 0;
  const std::vector<int32_t> replay(s.since_snapshot.begin(), s.since_snapshot.begin() + (new_length - s.snapshot_length));
  const bool prompt = s.since_snapshot_prompt;
  s.length = s.snapshot_length;
  s.since_snapshot.clear();
  if (replay.empty()) return {};
  // Same tokens, same prompt flag: batch invariance makes the replayed state and KV
  // bitwise those of the step being rolled back.
  StepRequest r;
  r.seq = seq;
  r.tokens = replay;
  r.prompt = prompt;
  auto st = step(std::span<const StepRequest>(&r, 1));
  if (!st) return make_error(st.error().code, "truncate_sequence: replaying the kept tokens failed: " + st.error().message);
  return {};
}

size_t Engine::snapshot_row_count(const StepRequest& r, const Sequence& s) {
  if (r.prompt || r.tokens.size() < 2) return 0;
  return std::min<size_t>(r.tokens.size() - 1, s.row_slots.size());
}

Status Engine::copy_state_slot(int32_t from, int32_t to) { return backend_->copy_state_slot(from, to); }

Status Engine::reset_state_slot(int32_t slot) { return backend_->reset_state_slot(slot); }

Status Engine::copy_kv_block(int32_t pool, int32_t from, int32_t to) {
  if (pool < 0 || pool >= num_kv_pools() || from < 0 || to < 0 || from >= kv_pool(pool).num_blocks() || to >= kv_pool(pool).num_blocks())
    return make_error(ErrorCode::invalid_argument, "copy_kv_block: pool or block out of range");
  return backend_->copy_kv_block(pool, from, to);
}

Result<std::vector<std::vector<float>>> Engine::step(std::span<const StepRequest> requests) {
  if (requests.empty()) return std::vector<std::vector<float>>{};
  auto pending = step_issue(requests, -1);
  if (!pending) return pending.error();
  return step_collect(**pending);
}

Result<std::vector<std::vector<float>>> Engine::step_hidden(std::span<const StepRequest> requests) {
  if (requests.empty()) return std::vector<std::vector<float>>{};
  if (hidden_width_ <= 0)
    return make_error(ErrorCode::unsupported, "family plugin '" + plan_->plugin_name() +
                                                  "' does not return hidden states (memra_plan_info.hidden_width, ABI 2.3), "
                                                  "so this model cannot make embeddings");
  auto pending = issue(requests, -1, MEMRA_ROW_OUTPUT_HIDDEN);
  if (!pending) return pending.error();
  return step_collect(**pending);
}

namespace {

// A step's forward batch over its own arrays (the rest of the fields stay the caller's).
void bind_arrays(PendingStep& p, int32_t num_seqs, int32_t max_blocks, int32_t num_pools) {
  memra_forward_batch& batch = p.batch;
  batch.struct_size = MEMRA_FORWARD_BATCH_STRUCT_SIZE;
  batch.num_tokens = static_cast<int32_t>(p.ids.size());
  batch.token_ids = p.ids.data();
  batch.positions = p.positions.data();
  batch.seq_index = p.seq_index.data();
  batch.num_seqs = num_seqs;
  batch.seq_lens = p.seq_lens.data();
  batch.block_tables = p.tables.data();
  batch.max_blocks_per_seq = max_blocks;
  batch.num_logits = static_cast<int32_t>(p.logit_rows.size());
  batch.logits_rows = p.logit_rows.data();
  batch.logits = p.logits.data();
  batch.prompt_tokens = p.prompt_flags.data();
  batch.num_kv_pools = num_pools;
}

}  // namespace

Result<std::vector<HeadRows>> Engine::step_head(std::span<const HeadRequest> requests) {
  if (draft_layers() == 0)
    return make_error(ErrorCode::unsupported, "this model has no draft head enabled (EngineOptions::draft_head, memra_plan_info.draft_layers)");
  if (requests.empty()) return std::vector<HeadRows>{};
  const auto width = static_cast<size_t>(hidden_width_);
  PendingStep p;
  size_t max_blocks = 1;
  std::set<int32_t> seen;
  for (const HeadRequest& r : requests) {
    auto it = sequences_.find(r.seq);
    if (it == sequences_.end() || !seen.insert(r.seq).second || r.tokens.empty() || r.position < 0 ||
        r.hidden.size() != r.tokens.size() * width)
      return make_error(ErrorCode::invalid_argument, "step_head: unknown or repeated sequence, no rows, or hidden rows of the wrong size");
    const int64_t end = r.position + static_cast<int64_t>(r.tokens.size());
    if (end > max_context_) return make_error(ErrorCode::invalid_argument, "step_head: rows past the context");
    // The head drafts ahead of the sequence: blocks for its positions (pool 0, where its
    // layer keeps KV; the next steps use them, truncate_sequence gives them back).
    Sequence& s = it->second;
    const auto entries = static_cast<size_t>((end + block_size_ - 1) / block_size_);
    while (s.blocks[0].size() < entries) {
      auto b = pools_[0].allocate();
      while (!b && prefix_cache_.evict_one()) b = pools_[0].allocate();
      if (!b) return make_error(ErrorCode::conflict, "KV cache is full");
      s.blocks[0].push_back(*b);
    }
    max_blocks = std::max(max_blocks, s.blocks[0].size());
  }
  p.tables.assign(pools_.size() * requests.size() * max_blocks, -1);
  std::vector<float> hidden_in;
  for (size_t i = 0; i < requests.size(); ++i) {
    const HeadRequest& r = requests[i];
    const Sequence& s = sequences_[r.seq];
    for (size_t t = 0; t < r.tokens.size(); ++t) {
      if (r.tokens[t] < 0 || r.tokens[t] >= vocab_)
        return make_error(ErrorCode::invalid_argument, "token id " + std::to_string(r.tokens[t]) + " is outside the vocabulary");
      p.ids.push_back(r.tokens[t]);
      p.positions.push_back(static_cast<int32_t>(r.position + static_cast<int64_t>(t)));
      p.seq_index.push_back(static_cast<int32_t>(i));
      p.prompt_flags.push_back(0);
    }
    p.logit_rows.push_back(static_cast<int32_t>(p.ids.size() - 1));
    p.seq_lens.push_back(static_cast<int32_t>(r.position + static_cast<int64_t>(r.tokens.size())));
    hidden_in.insert(hidden_in.end(), r.hidden.begin(), r.hidden.end());
    for (size_t pool = 0; pool < pools_.size(); ++pool)
      std::copy(s.blocks[pool].begin(), s.blocks[pool].end(),
                p.tables.begin() + static_cast<std::ptrdiff_t>((pool * requests.size() + i) * max_blocks));
  }
  p.logits.resize(p.logit_rows.size() * static_cast<size_t>(vocab_));
  p.hidden.resize(p.ids.size() * width);
  memra_forward_batch& batch = p.batch;
  bind_arrays(p, static_cast<int32_t>(requests.size()), static_cast<int32_t>(max_blocks), static_cast<int32_t>(pools_.size()));
  batch.head = 1;
  batch.hidden_in = hidden_in.data();
  batch.hidden_out = p.hidden.data();
  if (const Status b = backend_->begin_step(-1); !b) return b.error();
  Status st = backend_->forward(batch, [this](size_t table, const memra_forward_batch& b) { return models_[table]->forward(b); });
  if (st) st = backend_->synchronize();
  if (!st) {
    std::string msg = st.error().message;
    if (const std::string backend_error = backend_->last_error(); !backend_error.empty()) msg += " (backend: " + backend_error + ")";
    return make_error(st.error().code, "draft head step: " + msg);
  }
  std::vector<HeadRows> out(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    out[i].logits.assign(p.logits.begin() + static_cast<std::ptrdiff_t>(i * static_cast<size_t>(vocab_)),
                         p.logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * static_cast<size_t>(vocab_)));
    const auto last = static_cast<size_t>(p.logit_rows[i]);
    out[i].hidden.assign(p.hidden.begin() + static_cast<std::ptrdiff_t>(last * width),
                         p.hidden.begin() + static_cast<std::ptrdiff_t>((last + 1) * width));
  }
  return out;
}

Result<std::unique_ptr<PendingStep>> Engine::step_issue(std::span<const StepRequest> requests, int32_t slot) {
  return issue(requests, slot, MEMRA_ROW_OUTPUT_LOGITS);
}

Result<std::unique_ptr<PendingStep>> Engine::issue(std::span<const StepRequest> requests, int32_t slot, int32_t row_output) {
  if (requests.empty()) return make_error(ErrorCode::invalid_argument, "step: no requests");
  if (slot < -1 || slot > 1) return make_error(ErrorCode::invalid_argument, "step: slot must be 0 or 1");
  // Reserve KV blocks for every request first; undo on failure so nothing leaks.
  std::vector<std::pair<int32_t, size_t>> grown;  // (seq, table entries before)
  bool snapshotted = false;
  auto undo = [&] {
    for (auto& [seq, before] : grown) {
      Sequence& s = sequences_[seq];
      release_blocks_from(s, before);
      // A failed forward may have advanced some layers' state: back to the snapshot.
      // The snapshot now holds the state at the current length.
      if (snapshotted) {
        (void)copy_state_slot(s.snapshot_slot, s.state_slot);
        s.snapshot_length = s.length;
        s.since_snapshot.clear();
        s.rows_snapshotted = 0;
      }
    }
  };
  std::set<int32_t> seen;
  for (const StepRequest& r : requests) {
    auto it = sequences_.find(r.seq);
    if (it == sequences_.end() || !seen.insert(r.seq).second || r.tokens.empty()) {
      undo();
      return make_error(ErrorCode::invalid_argument, "step: unknown or repeated sequence, or no tokens");
    }
    Sequence& s = it->second;
    const int64_t new_len = s.length + static_cast<int64_t>(r.tokens.size());
    if (new_len > max_context_) {
      undo();
      return make_error(ErrorCode::invalid_argument, "sequence would exceed the context of " + std::to_string(max_context_) + " tokens");
    }
    // Sliding pools first give back what no token of this step reads, then every pool
    // grows to cover the step's positions.
    drop_window_blocks(s, s.length);
    grown.emplace_back(r.seq, s.blocks[0].size());
    const auto entries = static_cast<size_t>((new_len + block_size_ - 1) / block_size_);
    for (size_t pool = 0; pool < pools_.size(); ++pool)
      while (s.blocks[pool].size() < entries) {
        auto b = pools_[pool].allocate();
        while (!b && prefix_cache_.evict_one(static_cast<int32_t>(pool))) b = pools_[pool].allocate();  // cached prefixes yield first
        if (!b) {
          undo();
          return make_error(ErrorCode::conflict, "KV cache is full");
        }
        s.blocks[pool].push_back(*b);
      }
  }

  size_t max_blocks = 1;
  for (const StepRequest& r : requests) max_blocks = std::max(max_blocks, sequences_[r.seq].blocks[0].size());
  auto pending = std::make_unique<PendingStep>();
  PendingStep& p = *pending;
  if (has_recurrent_state()) {
    // Snapshot every sequence's state before the step: truncate_sequence restores it.
    for (const StepRequest& r : requests) {
      const Sequence& s = sequences_[r.seq];
      if (Status st = copy_state_slot(s.state_slot, s.snapshot_slot); !st) {
        undo();
        return st.error();
      }
      p.state_slots.push_back(s.state_slot);
    }
    snapshotted = true;
  }
  p.slot = slot;
  std::vector<int32_t>&ids = p.ids, &positions = p.positions, &seq_index = p.seq_index, &seq_lens = p.seq_lens,
                      &tables = p.tables, &logit_rows = p.logit_rows;
  std::vector<uint8_t>& prompt_flags = p.prompt_flags;
  // Every pool's tables, pool 0's first (memra_forward_batch.block_tables, ABI 2.5).
  tables.assign(pools_.size() * requests.size() * max_blocks, -1);
  for (size_t i = 0; i < requests.size(); ++i) {
    const StepRequest& r = requests[i];
    const Sequence& s = sequences_[r.seq];
    for (size_t t = 0; t < r.tokens.size(); ++t) {
      if (r.tokens[t] < 0 || r.tokens[t] >= vocab_) {
        undo();
        return make_error(ErrorCode::invalid_argument, "token id " + std::to_string(r.tokens[t]) + " is outside the vocabulary");
      }
      if (r.wants_rows && (r.all_logits || t + 1 == r.tokens.size())) logit_rows.push_back(static_cast<int32_t>(ids.size()));
      ids.push_back(r.tokens[t]);
      prompt_flags.push_back(r.prompt ? 1 : 0);
      positions.push_back(static_cast<int32_t>(s.length + static_cast<int64_t>(t)));
      seq_index.push_back(static_cast<int32_t>(i));
    }
    seq_lens.push_back(static_cast<int32_t>(s.length + static_cast<int64_t>(r.tokens.size())));
    for (size_t pool = 0; pool < pools_.size(); ++pool)
      std::copy(s.blocks[pool].begin(), s.blocks[pool].end(),
                tables.begin() + static_cast<std::ptrdiff_t>((pool * requests.size() + i) * max_blocks));
  }
  // Row snapshots for the rows of multi-token generated steps (verify steps), but the
  // last (keeping every token needs no rollback).
  if (row_snapshots_ > 0)
    for (size_t i = 0, row = 0; i < requests.size(); row += requests[i].tokens.size(), ++i) {
      const StepRequest& r = requests[i];
      const Sequence& s = sequences_[r.seq];
      const size_t n = snapshot_row_count(r, s);
      if (n == 0) continue;
      if (p.snapshot_rows.empty()) p.snapshot_rows.assign(ids.size(), -1);
      for (size_t t = 0; t < n; ++t) p.snapshot_rows[row + t] = s.row_slots[t];
    }
  const bool hidden = row_output == MEMRA_ROW_OUTPUT_HIDDEN;
  p.row_width = hidden ? hidden_width_ : vocab_;
  const bool hidden_rows = std::any_of(requests.begin(), requests.end(), [](const StepRequest& r) { return r.want_hidden; });
  if (hidden_rows) {
    if (hidden_width_ <= 0 || slot >= 0) {
      undo();
      return make_error(ErrorCode::unsupported, "step: hidden rows need a family that returns them (memra_plan_info.hidden_width) "
                                                "and a plain (not rolling) step");
    }
    p.hidden.assign(ids.size() * static_cast<size_t>(hidden_width_), 0.0f);
  }
  std::vector<float>& logits = p.logits;
  logits.resize(logit_rows.size() * static_cast<size_t>(p.row_width));
  memra_forward_batch& batch = p.batch;
  bind_arrays(p, static_cast<int32_t>(requests.size()), static_cast<int32_t>(max_blocks), static_cast<int32_t>(pools_.size()));
  batch.state_slots = p.state_slots.empty() ? nullptr : p.state_slots.data();
  batch.snapshot_slots = p.snapshot_rows.empty() ? nullptr : p.snapshot_rows.data();
  batch.row_output = row_output;
  batch.hidden_out = hidden_rows ? p.hidden.data() : nullptr;
  if (keep_logits_on_device_ && !hidden) {
    // Sampled on the device: the logits stay there (backend.hpp sample_rows).
    logits.clear();
    batch.logits = nullptr;
  }

  // A rolling step: its slot's scratch, and on a backend that defers them, the logits
  // collected later.
  p.deferred = slot >= 0 && backend_->defers_slot_logits();
  if (const Status b = backend_->begin_step(slot); !b) {
    undo();
    return b.error();
  }
  Status st = backend_->forward(batch, [this](size_t table, const memra_forward_batch& b) { return models_[table]->forward(b); });
  if (st && hidden_rows) st = backend_->synchronize();  // the rows are on the host once it returns
  if (!st) {
    undo();
    std::string msg = st.error().message;
    if (const std::string backend_error = backend_->last_error(); !backend_error.empty()) msg += " (backend: " + backend_error + ")";
    return make_error(st.error().code, msg);
  }
  for (const StepRequest& r : requests) {
    Sequence& s = sequences_[r.seq];
    if (snapshotted) {
      s.snapshot_length = s.length;
      s.since_snapshot.assign(r.tokens.begin(), r.tokens.end());
      s.since_snapshot_prompt = r.prompt;
      s.rows_snapshotted = p.snapshot_rows.empty() ? 0 : static_cast<int64_t>(snapshot_row_count(r, s));
    }
    s.length += static_cast<int64_t>(r.tokens.size());
  }
  return pending;
}

Result<std::vector<std::vector<float>>> Engine::step_collect(PendingStep& p) {
  if (p.deferred) {
    p.deferred = false;
    if (const Status w = backend_->wait_logits(p.slot); !w) {
      std::string msg = w.error().message;
      if (const std::string backend_error = backend_->last_error(); !backend_error.empty()) msg += " (backend: " + backend_error + ")";
      return make_error(w.error().code, msg);
    }
  }
  // Logits kept on the device (sampled there): no rows.
  const size_t rows = p.logits.empty() ? 0 : p.logit_rows.size();
  const auto vocab = static_cast<size_t>(p.row_width);
  std::vector<std::vector<float>> out;
  out.reserve(rows);
  for (size_t i = 0; i < rows; ++i)
    out.emplace_back(p.logits.begin() + static_cast<std::ptrdiff_t>(i * vocab),
                     p.logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab));
  return out;
}

// Each request's rows are consecutive in a step's output: all_logits gives one per
// token, else one. first[i] is request i's first row, count[i] its number of rows.
struct RowLayout {
  std::vector<size_t> first, count;
  size_t total = 0;
};

namespace {

Result<RowLayout> row_layout(std::span<const StepRequest> requests) {
  RowLayout l;
  l.first.resize(requests.size());
  l.count.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const StepRequest& r = requests[i];
    l.first[i] = l.total;
    l.count[i] = step_rows(r);
    l.total += l.count[i];
    if (r.sampling && (!r.sampling->params || r.sampling->rows < 0 || static_cast<size_t>(r.sampling->rows) > l.count[i] ||
                       r.sampling->assumed.size() + 1 < static_cast<size_t>(r.sampling->rows)))
      return make_error(ErrorCode::invalid_argument, "step_sampled: a request samples more rows than it computes");
  }
  return l;
}

bool wants_rows(const StepRequest& r) { return !r.sampling || r.sampling->want_logits; }

// The penalty entries of sampled row t of a request.
std::vector<sampling::PenaltyEntry> row_penalties(const RowSampling& s, int32_t t) {
  return penalty_entries(*s.params, s.prompt, s.output, s.assumed.subspan(0, static_cast<size_t>(t)));
}

// Samples on the host what `requests` ask for, from the step's rows (moved into out).
void sample_on_host(std::span<const StepRequest> requests, const RowLayout& l, int64_t vocab,
                    std::vector<std::vector<float>>& rows, std::vector<StepRows>& out) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const StepRequest& r = requests[i];
    if (r.sampling)
      for (int32_t t = 0; t < r.sampling->rows; ++t) {
        const auto& row = rows[l.first[i] + l.count[i] - static_cast<size_t>(r.sampling->rows) + static_cast<size_t>(t)];
        const std::vector<sampling::PenaltyEntry> pen = row_penalties(*r.sampling, t);
        const sampling::RowParams params = row_params(*r.sampling->params, r.sampling->position + static_cast<uint64_t>(t));
        // Step 0 (bias, mask) on a copy, as the kernel does.
        const std::vector<float> adjusted =
            r.sampling->adjust.empty() ? std::vector<float>{} : adjusted_row(row, r.sampling->adjust[static_cast<size_t>(t)]);
        const float* src = adjusted.empty() ? row.data() : adjusted.data();
        out[i].tokens.push_back(ref::sample_row(src, vocab, params, pen.data(), static_cast<int32_t>(pen.size())));
      }
    if (wants_rows(r))
      for (size_t k = 0; k < l.count[i]; ++k) out[i].logits.push_back(std::move(rows[l.first[i] + k]));
  }
}

}  // namespace

// A step's sampling request for the device (backend.hpp sample_rows), with the arrays
// it points into.
struct Engine::DeviceSamples {
  std::vector<int32_t> rows, offsets{0};
  std::vector<sampling::RowParams> params;
  std::vector<sampling::PenaltyEntry> pens;
  // Step 0, filled only when some row has it.
  std::vector<int32_t> bias_offsets;
  std::vector<sampling::BiasEntry> biases;
  std::vector<int64_t> mask_offsets;
  std::vector<uint64_t> masks;
  backend::SampleRequest request;
};

std::unique_ptr<Engine::DeviceSamples> Engine::device_samples(std::span<const StepRequest> requests, const RowLayout& l) const {
  auto d = std::make_unique<DeviceSamples>();
  const bool step0 = std::any_of(requests.begin(), requests.end(),
                                 [](const StepRequest& r) { return r.sampling && !r.sampling->adjust.empty(); });
  const size_t words = static_cast<size_t>((vocab_ + 63) / 64);
  if (step0) d->bias_offsets.push_back(0);
  for (size_t i = 0; i < requests.size(); ++i) {
    const RowSampling* s = requests[i].sampling;
    if (!s) continue;
    for (int32_t t = 0; t < s->rows; ++t) {
      d->rows.push_back(static_cast<int32_t>(l.first[i] + l.count[i] - static_cast<size_t>(s->rows) + static_cast<size_t>(t)));
      d->params.push_back(row_params(*s->params, s->position + static_cast<uint64_t>(t)));
      for (const sampling::PenaltyEntry& e : row_penalties(*s, t)) d->pens.push_back(e);
      d->offsets.push_back(static_cast<int32_t>(d->pens.size()));
      if (!step0) continue;
      const RowAdjust* a = s->adjust.empty() ? nullptr : &s->adjust[static_cast<size_t>(t)];
      if (a) d->biases.insert(d->biases.end(), a->bias.begin(), a->bias.end());
      d->bias_offsets.push_back(static_cast<int32_t>(d->biases.size()));
      if (a && a->allowed) {
        // Exactly ceil(vocab / 64) words: a shorter bitset leaves the rest out, as the reference does.
        d->mask_offsets.push_back(static_cast<int64_t>(d->masks.size()));
        const size_t have = std::min(words, a->allowed->size());
        d->masks.insert(d->masks.end(), a->allowed->begin(), a->allowed->begin() + static_cast<std::ptrdiff_t>(have));
        d->masks.resize(d->masks.size() + (words - have), 0);
      } else {
        d->mask_offsets.push_back(-1);
      }
    }
  }
  backend::SampleRequest& req = d->request;
  req.logits = nullptr;  // this step's, kept on the device
  req.vocab = vocab_;
  req.rows = d->rows;
  req.params = d->params;
  req.penalty_offsets = d->offsets;
  req.penalties = d->pens;
  req.bias_offsets = d->bias_offsets;
  req.biases = d->biases;
  req.mask_offsets = d->mask_offsets;
  req.masks = d->masks;
  return d;
}

namespace {
// Hands each request its share of the step's sampled tokens, in request order.
void deal_tokens(std::span<const StepRequest> requests, const std::vector<int32_t>& tokens, std::vector<StepRows>& out) {
  size_t at = 0;
  for (size_t i = 0; i < requests.size(); ++i)
    if (const RowSampling* s = requests[i].sampling)
      for (int32_t t = 0; t < s->rows; ++t) out[i].tokens.push_back(tokens[at++]);
}
}  // namespace

namespace {

// StepRequest::want_hidden: each such request's rows of the step's hidden states.
void deal_hidden(std::span<const StepRequest> requests, const PendingStep& p, int64_t width, std::vector<StepRows>& out) {
  if (p.hidden.empty()) return;
  size_t row = 0;
  for (size_t i = 0; i < requests.size(); row += requests[i].tokens.size(), ++i)
    if (requests[i].want_hidden)
      out[i].hidden.assign(p.hidden.begin() + static_cast<std::ptrdiff_t>(row * static_cast<size_t>(width)),
                           p.hidden.begin() + static_cast<std::ptrdiff_t>((row + requests[i].tokens.size()) * static_cast<size_t>(width)));
}

}  // namespace

Result<std::vector<StepRows>> Engine::step_sampled(std::span<const StepRequest> requests) {
  std::vector<StepRows> out(requests.size());
  if (requests.empty()) return out;
  auto layout = row_layout(requests);
  if (!layout) return layout.error();
  const RowLayout& l = *layout;

  const bool device = backend_->samples_on_device();
  keep_logits_on_device_ = device;
  auto pending = step_issue(requests, -1);
  keep_logits_on_device_ = false;
  if (!pending) return pending.error();
  deal_hidden(requests, **pending, hidden_width_, out);

  if (!device) {
    auto rows = step_collect(**pending);
    if (!rows) return rows.error();
    sample_on_host(requests, l, vocab_, *rows, out);
    return out;
  }

  // On the GPU: rows that must reach the host, then one sampling launch for the step.
  std::vector<int32_t> host_rows;
  for (size_t i = 0; i < requests.size(); ++i)
    if (wants_rows(requests[i]))
      for (size_t k = 0; k < l.count[i]; ++k) host_rows.push_back(static_cast<int32_t>(l.first[i] + k));
  if (!host_rows.empty()) {
    std::vector<float> buf(host_rows.size() * static_cast<size_t>(vocab_));
    if (Status st = backend_->logits_rows_to_host(host_rows, buf.data()); !st) return st.error();
    size_t at = 0;
    for (size_t i = 0; i < requests.size(); ++i)
      if (wants_rows(requests[i]))
        for (size_t k = 0; k < l.count[i]; ++k, ++at)
          out[i].logits.emplace_back(buf.begin() + static_cast<std::ptrdiff_t>(at * static_cast<size_t>(vocab_)),
                                     buf.begin() + static_cast<std::ptrdiff_t>((at + 1) * static_cast<size_t>(vocab_)));
  }
  const auto samples = device_samples(requests, l);
  if (samples->rows.empty()) return out;
  std::vector<int32_t> tokens(samples->rows.size(), -1);
  if (Status st = backend_->sample_rows(samples->request, tokens.data()); !st) return st.error();
  deal_tokens(requests, tokens, out);
  return out;
}

Result<std::unique_ptr<PendingStep>> Engine::step_issue_sampled(std::span<const StepRequest> requests, int32_t slot) {
  auto layout = row_layout(requests);
  if (!layout) return layout.error();
  // On the device (a pipeline's last stage) when every row is only sampled (rows a
  // request wants as logits come to the host with the step, and then it is sampled there).
  const bool device = backend_->samples_on_device() && slot >= 0 &&
                      std::none_of(requests.begin(), requests.end(), [](const StepRequest& r) { return wants_rows(r); });
  keep_logits_on_device_ = device;
  auto pending = step_issue(requests, slot);
  keep_logits_on_device_ = false;
  if (!pending || !device) return pending;
  PendingStep& p = **pending;
  const auto samples = device_samples(requests, *layout);
  p.sampled_on_device = true;
  p.tokens.assign(samples->rows.size(), -1);
  if (!samples->rows.empty())
    if (Status st = backend_->sample_rows(samples->request, p.tokens.data()); !st) {
      (void)step_collect(p);  // let the step finish before its arrays go
      return st.error();
    }
  return pending;
}

Result<std::vector<StepRows>> Engine::step_collect_sampled(PendingStep& p, std::span<const StepRequest> requests) {
  auto layout = row_layout(requests);
  if (!layout) return layout.error();
  std::vector<StepRows> out(requests.size());
  auto rows = step_collect(p);  // the tokens too, for a step sampled on the device
  if (!rows) return rows.error();
  deal_hidden(requests, p, hidden_width_, out);
  if (p.sampled_on_device) deal_tokens(requests, p.tokens, out);
  else sample_on_host(requests, *layout, vocab_, *rows, out);
  return out;
}

}  // namespace memra::engine
