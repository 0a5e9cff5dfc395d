// memra::backend::Backend — the one interface the engine runs a model on: the CPU
// reference (cpu/), a CUDA device (cuda/, a module opened at run time) or a pipeline
// of stage backends, each holding a range of layers (pipeline/). The engine holds one
// Backend and never asks which kind it is.
//
// A backend gives the family plugin its op table (memra_backend_ops, the SDK ABI),
// holds the model's weights and state (paged KV cache, recurrent-state slots), runs a
// step between begin_step and the logits, and can sample the step's rows on the
// device. Everything here is C++ inside one build: the CUDA module is built with the
// host and checked against kBackendInterfaceVersion when it opens.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "kernels/sampling/sampling_math.cuh"
#include "memra/backend.h"
#include "memra/host_api.h"
#include "memra/quant.h"

namespace memra::plugins {
class KernelServices;
}
namespace memra::ops {
struct PluginOp;
}

namespace memra::backend {

// Bumped whenever anything in this header changes shape: the CUDA module reports the
// version it was built with and a different one is refused at open.
inline constexpr uint32_t kBackendInterfaceVersion = 6;

// Bytes of one KV element (4, 2 or 1), or 0 for a dtype the KV cache does not support.
inline uint64_t kv_element_bytes(memra_dtype dtype) {
  return dtype == MEMRA_DTYPE_F32                                ? 4u
         : dtype == MEMRA_DTYPE_F16 || dtype == MEMRA_DTYPE_BF16 ? 2u
         : dtype == MEMRA_DTYPE_F8_E4M3                          ? 1u
                                                                 : 0u;
}

// Bytes one position keeps per kv head: its head_dim elements, and for fp8 its f32 scale
// (kernels/attention/attention_ref.hpp: a block's codes, then its scales).
inline uint64_t kv_row_bytes(memra_dtype dtype, int64_t head_dim) {
  return static_cast<uint64_t>(head_dim) * kv_element_bytes(dtype) + (dtype == MEMRA_DTYPE_F8_E4M3 ? 4u : 0u);
}

// One layer's paged KV geometry and element type: MEMRA_DTYPE_F32, MEMRA_DTYPE_F16,
// MEMRA_DTYPE_BF16 (K after RoPE and V rounded to the 16-bit type when written) or
// MEMRA_DTYPE_F8_E4M3 (quantised per position and kv head with an f32 scale;
// docs/ARCHITECTURE.md, "KV cache element type"). kv_heads 0: the layer keeps no KV (a recurrent layer).
// pool: the KV pool whose blocks hold it; window: that pool's sliding window (0: every
// position is kept; N: a query reads only the last N positions, and blocks before them
// are dropped, so their table entries are -1).
struct KvLayerConfig {
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  memra_dtype dtype = MEMRA_DTYPE_F32;
  int32_t pool = 0;
  int64_t window = 0;
};

// The paged KV cache, sized from the plan's state groups layer by layer (each group its
// own geometry and dtype). Layers live in KV pools (docs/ARCHITECTURE.md, "State
// manager"): full-attention layers in one pool, each sliding-window size in its own,
// sized for its window only. Pool p has pool_blocks[p] blocks of block_size positions;
// a sequence has one block table per pool (memra_forward_batch.block_tables: pool 0's
// tables, then pool 1's, ...). The cache holds the model's layers
// [first_layer, first_layer + layers.size()) (a pipeline stage holds a range); ops name
// layers by the model's index.
struct KvCacheConfig {
  std::vector<KvLayerConfig> layers;
  int64_t block_size = 16;
  std::vector<int64_t> pool_blocks;
  int64_t first_layer = 0;

  // Every layer alike, one pool (tools and tests).
  static KvCacheConfig uniform(int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t block_size, int64_t num_blocks,
                               memra_dtype dtype = MEMRA_DTYPE_F32) {
    KvCacheConfig c;
    c.layers.assign(static_cast<size_t>(layers), KvLayerConfig{kv_heads, head_dim, dtype});
    c.block_size = block_size;
    c.pool_blocks = {num_blocks};
    return c;
  }
  int64_t num_layers() const { return static_cast<int64_t>(layers.size()); }
  int32_t num_pools() const { return static_cast<int32_t>(pool_blocks.size()); }
  // Blocks of the pool holding backend layer l.
  int64_t blocks_of(size_t l) const {
    const int32_t p = layers[l].pool;
    return p >= 0 && p < num_pools() ? pool_blocks[static_cast<size_t>(p)] : 0;
  }
  // The layer of the model's index `layer`, or nullptr when this cache does not hold it
  // or it keeps no KV.
  const KvLayerConfig* layer(int64_t model_layer) const {
    const int64_t l = model_layer - first_layer;
    if (l < 0 || l >= num_layers() || layers[static_cast<size_t>(l)].kv_heads <= 0) return nullptr;
    return &layers[static_cast<size_t>(l)];
  }
  // The layer an attention op names, checked against the geometry and window its group
  // declared; nullptr with `why` (for the op's error) when this cache holds no KV for it,
  // differs, or keeps fewer positions than the op would read.
  const KvLayerConfig* attention_layer(const memra_attention_params& p, std::string* why) const {
    const KvLayerConfig* g = layer(p.layer);
    const std::string name = "attention: layer " + std::to_string(p.layer);
    if (!g) *why = name + " has no KV in this cache";
    else if (p.num_kv_heads != g->kv_heads || p.head_dim != g->head_dim)
      *why = name + "'s heads/head_dim differ from the KV its state group declared";
    else if (g->window > 0 && (p.sliding_window <= 0 || p.sliding_window > g->window))
      *why = name + " reads " + (p.sliding_window <= 0 ? std::string("every position") : "a window of " + std::to_string(p.sliding_window)) +
             " but its state group keeps only the last " + std::to_string(g->window);
    else return g;
    return nullptr;
  }
  // Sequence s's block table for layer g in `batch` (the layer's pool's tables).
  static const int32_t* block_table(const memra_forward_batch& batch, const KvLayerConfig& g, int32_t s) {
    return batch.block_tables + (static_cast<int64_t>(g.pool) * batch.num_seqs + s) * batch.max_blocks_per_seq;
  }
  // Why token t of `batch` cannot write its K/V into layer g and read its `window` (0:
  // every earlier position): a position beyond the table, a block id outside the pool or
  // one the pool dropped, or too few tables in the batch. Empty when it can.
  std::string token_blocks_error(const memra_forward_batch& batch, const KvLayerConfig& g, int32_t t, int64_t window) const {
    const int32_t pools =
        batch.struct_size >= MEMRA_STRUCT_SIZE(memra_forward_batch, num_kv_pools) && batch.num_kv_pools > 0 ? batch.num_kv_pools : 1;
    if (g.pool >= pools) return "attention: the batch carries " + std::to_string(pools) + " KV pool tables, the cache has " + std::to_string(num_pools());
    const int32_t s = batch.seq_index[t];
    const int64_t pos = batch.positions[t];
    if (s < 0 || s >= batch.num_seqs || pos < 0) return "attention: bad sequence index or position";
    if (pos / block_size >= batch.max_blocks_per_seq) return "attention: position beyond block table";
    const int32_t* table = block_table(batch, g, s);
    const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    const int64_t blocks = pool_blocks[static_cast<size_t>(g.pool)];
    for (int64_t b = first / block_size; b <= pos / block_size; ++b)
      if (table[b] < 0 || table[b] >= blocks) return "attention: bad KV block id";
    return {};
  }
  // Bytes of one block of backend layer l's K (or V).
  uint64_t block_bytes(size_t l) const {
    const KvLayerConfig& c = layers[l];
    return static_cast<uint64_t>(block_size * c.kv_heads) * kv_row_bytes(c.dtype, c.head_dim);
  }
  uint64_t layer_bytes(size_t l) const { return block_bytes(l) * static_cast<uint64_t>(blocks_of(l)); }
  // Where backend layer l's K (or V) starts in one allocation of every layer's.
  uint64_t layer_offset(size_t l) const {
    uint64_t o = 0;
    for (size_t i = 0; i < l; ++i) o += layer_bytes(i);
    return o;
  }
  // K (or V) of every layer.
  uint64_t bytes() const { return layer_offset(layers.size()); }
  // Whether the geometry is usable: a block size, every pool non-empty, every KV layer in one.
  bool valid() const {
    if (block_size <= 0 || pool_blocks.empty()) return false;
    for (int64_t n : pool_blocks)
      if (n <= 0) return false;
    for (const KvLayerConfig& l : layers)
      if (l.kv_heads > 0 && (l.pool < 0 || l.pool >= num_pools() || l.window < 0)) return false;
    return true;
  }
};

// Recurrent state (the plan's RECURRENT groups, docs/ARCHITECTURE.md "State manager"):
// `slots` rows per layer; layer_bytes[l] is what one slot of backend layer l takes
// (0: the layer keeps no recurrent state). Slots are the engine's to assign.
struct RecurrentStateConfig {
  int64_t slots = 0;
  std::vector<uint64_t> layer_bytes;
  uint64_t bytes() const {
    uint64_t n = 0;
    for (uint64_t b : layer_bytes) n += b * static_cast<uint64_t>(slots);
    return n;
  }
};

// What a backend holds for a model: its KV cache and recurrent state.
struct StateConfig {
  KvCacheConfig kv;
  RecurrentStateConfig recurrent;
};

// A quant plugin's table and its context for this host.
struct QuantTable {
  const memra_quant_api* api = nullptr;
  memra_plugin_ctx* ctx = nullptr;
};
// Finds the quant plugin that owns a scheme (a weight's quant name); api NULL when none does.
using QuantLookup = std::function<QuantTable(const char* scheme)>;

// Every setting of a backend, fixed when it opens (nothing is read per step).
struct BackendOptions {
  memra_backend_kind kind = MEMRA_BACKEND_CPU;
  QuantLookup quant_lookup;  // the CPU reference's matmul calls the scheme's plugin

  // CUDA
  std::string module_path;  // "" = default_cuda_backend_path()
  int device = 0;
  bool allow_ptx_jit = false;  // run a module from PTX when the fatbin has no SASS for the device (degraded)
  bool use_nvrtc = true;       // NVRTC shape-specialised kernels where the backend has them
  std::string kernel_dir;      // "" = <module dir>/kernels
  std::string cache_dir;       // NVRTC cache; "" = $MEMRA_HOME/kernel-cache
  bool step_graphs = true;     // decode steps captured and replayed as CUDA graphs
  bool sync_each_op = false;   // wait after every op (debugging: errors at the op that failed)
  bool device_sampling = true; // sample rows on the GPU (else copied rows on the host)
  // Single-pass prompt rows of bf16 weights through cuBLASLt (a row-invariant pinned
  // algorithm per shape): "" finds libcublasLt.so.13, "off" never, else its path.
  std::string cublaslt;
  bool programmatic_launch = true;  // step graphs: PDL-aware kernels overlap the previous kernel's tail
  // int8 quantisation (or the fp8 GEMV's prepared rows) fused into norm/activation, merged q/k/v and gate/up GEMVs
  // (bitwise the unfused path; docs/PERFORMANCE.md, "Latest figures")
  bool fuse_decode = true;
  // Decode attention streams the K/V rows earlier steps wrote before waiting on the RoPE +
  // KV write (PDL); off: every row after the wait (the same results).
  bool early_kv_reads = true;
  // Prompt steps through cuBLASLt: each weight's dequantisation into the bf16 plane runs on a
  // side stream, a matmul ahead, into two planes taken in turn (the same values; off: on the
  // step's stream, before its product). Off until it has run on a GPU (docs/PERFORMANCE.md,
  // session 25).
  bool overlap_dequant = false;
  void (*log)(void* user, memra_log_level level, const char* message) = nullptr;  // NULL: stderr, WARN and up
  void* log_user = nullptr;

  // The debugging switches of docs/FLAGS.md ("Environment"), applied over these options
  // once, by open_backend: MEMRA_CUDA_BACKEND, MEMRA_CUDA_GRAPH=0, MEMRA_CUDA_SYNC=1,
  // MEMRA_DEVICE_SAMPLING=0, MEMRA_CUBLASLT,
  // MEMRA_CUDA_PDL=0, MEMRA_CUDA_FUSE=0, MEMRA_CUDA_EARLY_KV=0, MEMRA_CUDA_DEQUANT_OVERLAP=1.
  void apply_environment();
};

// Sampling on the device (sample_rows): one entry per sampled logits row.
struct SampleRequest {
  // Device [rows][vocab] f32 logits, or nullptr for the logits this step kept on the
  // device (valid until the next begin_step); vocab 0 = the kept tensor's.
  const float* logits = nullptr;
  int64_t vocab = 0;
  std::span<const int32_t> rows;                 // logits row of each sample (of this step's kept logits)
  std::span<const sampling::RowParams> params;   // per sample
  std::span<const int32_t> penalty_offsets;      // [samples + 1] into penalties
  std::span<const sampling::PenaltyEntry> penalties;
  // Step 0 (logit_bias, grammar masks), empty when no sample has it: bias_offsets
  // [samples + 1] into biases; mask_offsets [samples], each the first word of the
  // sample's allowed-token bitset in masks (ceil(vocab / 64) words) or -1 for none.
  std::span<const int32_t> bias_offsets;
  std::span<const sampling::BiasEntry> biases;
  std::span<const int64_t> mask_offsets;
  std::span<const uint64_t> masks;
};

// Counters (tests and tools read them); a backend without the event reports 0.
struct BackendStats {
  int64_t graph_replays = 0;             // steps issued as a replayed step graph
  int64_t graph_captures = 0;            // steps captured into a new (or updated) graph
  int64_t plugin_matmuls = 0;            // matmul ops served by a plugin's registered kernel
  int64_t plugin_launches_replayed = 0;  // plugin kernel_launch launches inside a replayed graph
  int64_t plugin_launches_captured = 0;  // ... inside a newly captured graph
  int64_t plugin_launches_eager = 0;     // ... outside any graph
  int64_t nvrtc_cache_hits = 0;          // NVRTC compiles served from the on-disk cache
  int64_t handoffs = 0;                  // pipeline: activation copies between stages, since the last step began
  uint64_t handoff_bytes = 0;
  int64_t fused_act_quantisations = 0;   // CUDA: producers (norm, gated activation) that also wrote int8x32 or fp8 rows
  int64_t merged_gemv_launches = 0;      // CUDA: int8 GEMVs merged into the previous one's launch (q/k/v, gate/up)
};

// A device's memory now (the memory plan, host/engine/memory_plan.hpp): a GPU's from the
// driver (device: a step's scratch shows in `free`), the CPU's from the system (MemTotal,
// MemAvailable; device false: the step's scratch is host memory that comes and goes).
struct MemoryInfo {
  uint64_t total = 0;
  uint64_t free = 0;
  bool device = false;
};

// A quant plugin's memra_quant_api.register_kernels.
using RegisterKernelsFn = memra_status (*)(memra_plugin_ctx* ctx, const memra_kernel_registrar* registrar);

// Runs the family plugin's model number `table` (the one bound to op_tables()[table])
// over `batch`.
using ForwardFn = std::function<Status(size_t table, const memra_forward_batch& batch)>;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "cpu", "cuda:0", "pipeline(cuda:0,cuda:1)"
  // One line for logs: the name, and for a pipeline its stages' layers and bytes.
  virtual std::string describe() const { return name(); }
  virtual memra_device_info device_info() const = 0;
  // The memory plan's view of the device (zeros: unknown, the engine does not plan).
  virtual MemoryInfo memory_info() const { return {}; }
  // The op table the family plugin's model runs on (valid while the backend lives).
  virtual const memra_backend_ops* ops() const = 0;
  // Every op table a model is bound to, one model each: this backend's, or a
  // pipeline's stages' (each runs its range of layers).
  virtual std::vector<const memra_backend_ops*> op_tables() const { return {ops()}; }
  // A step's forward pass: forward(0, batch) here; a pipeline runs each stage's model
  // over its layer range (memra_forward_batch.layer_begin, ABI 2.2), handing the carried
  // tensors from stage to stage.
  virtual Status forward(const memra_forward_batch& batch, const ForwardFn& fn) { return fn(0, batch); }
  // Detail of the last failing op or call ("" when none).
  virtual std::string last_error() const = 0;

  // Model lifetime, in this order. A quant plugin's kernels join the backend's kernel
  // registry (a backend that runs no plugin kernels refuses none and adds none) ...
  virtual Status register_kernels(const std::string& plugin, memra_plugin_ctx* ctx, RegisterKernelsFn fn, int32_t* added) {
    (void)plugin, (void)ctx, (void)fn;
    if (added) *added = 0;
    return {};
  }
  // ... the services plugin kernels load and launch through (nullptr: none) ...
  virtual plugins::KernelServices* kernel_services() { return nullptr; }
  // ... the ops the model's family plugin brings (host/ops/op_registry.hpp PluginOp;
  // register_plugin_ops in plugin_kernels.hpp binds the kernel services first): op_find
  // answers for them from then on. A GPU backend prepares each op's CUDA form there;
  // one it cannot (no CUDA form, or prepare_cuda failed) stays unavailable on it, with
  // one line in `refused` saying why. The definitions must outlive the backend.
  virtual Status register_ops(std::span<const ops::PluginOp> ops, std::vector<std::string>* refused) = 0;
  // ... the weights once (their data are host addresses; ops given those descriptors
  // resolve them to the backend's copies; a scheme without a kernel is refused) ...
  virtual Status upload_weights(const memra_weight_set& weights) = 0;
  // ... then the KV cache and recurrent state, zeroed.
  virtual Status allocate_state(const StateConfig& state) = 0;

  // A step: begin_step reclaims the previous step's scratch (slot -1) or, for rolling
  // steps, one of two step slots (0/1) whose previous step must have been collected;
  // then the model's forward pass; a slot step's logits arrive with wait_logits(slot).
  virtual Status begin_step(int32_t slot) = 0;
  virtual Status wait_logits(int32_t slot) {
    (void)slot;
    return {};
  }
  // Whether a slot step returns before its logits exist (wait_logits then waits).
  virtual bool defers_slot_logits() const { return false; }
  // Called with the step's batch before the backend's first op of a step (ops without a
  // batch argument may depend on it: the CUDA prompt-row matmul path).
  virtual Status prepare_batch(const memra_forward_batch& batch) {
    (void)batch;
    return {};
  }

  // State: one KV block of KV pool `pool` copied in every layer of that pool (fork,
  // prefix-cache copy-on-write); recurrent slots copied (fork, snapshot, restore) or
  // zeroed (a new sequence).
  virtual Status copy_kv_block(int32_t pool, int32_t from, int32_t to) = 0;
  virtual Status copy_state_slot(int32_t from, int32_t to) = 0;
  virtual Status reset_state_slot(int32_t slot) = 0;

  // Sampling on the device. When true, a step whose batch has logits == NULL keeps its
  // logits tensor on the device; sample_rows draws the requested rows (in a slot step
  // the tokens arrive with wait_logits) and logits_rows_to_host copies rows out.
  virtual bool samples_on_device() const { return false; }
  virtual Status sample_rows(const SampleRequest& request, int32_t* tokens) {
    (void)request, (void)tokens;
    return make_error(ErrorCode::unsupported, name() + " backend does not sample on a device");
  }
  virtual Status logits_rows_to_host(std::span<const int32_t> rows, float* dst) {
    (void)rows, (void)dst;
    return make_error(ErrorCode::unsupported, name() + " backend does not keep logits on a device");
  }

  // Memory of this backend (tensor data of its ops): for pipeline hand-offs, tools and
  // tests. copy_from copies `bytes` at `src` (memory of `from`) to `dst` (this
  // backend's), ordered after the work `from` has been given so far.
  virtual Status copy_from(Backend& from, void* dst, const void* src, uint64_t bytes) = 0;
  virtual Status copy_to_host(void* dst, const void* src, uint64_t bytes) = 0;
  virtual Status copy_to_device(void* dst, const void* src, uint64_t bytes) = 0;
  virtual Result<memra_buffer> memory_alloc(memra_memory_location location, uint64_t bytes) = 0;
  virtual void memory_free(memra_buffer& buffer) = 0;
  virtual Status synchronize() { return {}; }

  virtual BackendStats stats() const { return {}; }
};

// Opens a backend of options.kind (CPU or CUDA) after options.apply_environment().
// CUDA fails with `unsupported` and the reason when there is no driver or module.
Result<std::unique_ptr<Backend>> open_backend(BackendOptions options);

// $MEMRA_CUDA_BACKEND, else <executable dir>/../lib/memra/libmemra-backend-cuda.so.
std::string default_cuda_backend_path();

}  // namespace memra::backend
