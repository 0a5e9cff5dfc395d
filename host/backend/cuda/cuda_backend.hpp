// The CUDA backend: memra_backend_ops on one device through the driver API.
// Lives inside libmemra-backend-cuda.so; module_backend.cpp wraps it as a backend::Backend.
//
// Memory: weights are uploaded once (one allocation, pinned double-buffered copies)
// and found again by their host address; activations are f32 step scratch; the
// paged KV cache is f32 [layers][blocks][block_size][kv_heads][head_dim], the CPU
// backend's layout. Everything runs on one stream; a step's only host wait is the
// logits copy (and begin_step, which waits for the previous step).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <set>
#include <vector>

#include "host/backend/backend.hpp"
#include "host/backend/cuda/cublaslt_gemm.hpp"
#include "host/backend/cuda/device_context.hpp"
#include "host/backend/cuda/device_memory.hpp"
#include "host/backend/cuda/kernel_modules.hpp"
#include "host/backend/cuda/kernel_registry.hpp"
#include "kernels/matmul/gemv_mats.hpp"
#include "host/backend/cuda/nvrtc_compiler.hpp"
#include "host/ops/op_registry.hpp"
#include "memra/backend.h"

namespace memra::backend::cuda {

// Fills the C op table with trampolines into `ctx` (a CudaBackend*).
void fill_ops(memra_backend_ops& ops, memra_backend_ctx* ctx);

// The kernel registered for a weight's scheme and row length; for device kernels
// (memra_matmul_kernels) also their module, entry names and row geometry.
struct SchemeInfo {
  std::string scheme;  // lower case
  const KernelEntry* entry = nullptr;
  const DeviceMatmul* dev = nullptr;  // entry->device, or nullptr for a plugin's own matmul
  Module* module = nullptr;           // the plugin's module holding the entries
  std::string gemv;                   // ROWS form: the entry less "_t<N>" (alignment suffix applied)
  std::string embedding;              // the embedding entry (alignment suffix applied), or empty
  uint64_t row_bytes = 0;
  bool int8 = false;        // int8x32 activations: the INT8 GEMV form
  bool bf16s128 = false;    // bf16s128 activations (prepared once per row)
  bool mma = false;         // the MMA16 GEMV form
  std::string mma_kernel;   // its entry less the n-tile count: "<stem>_mma_n"
  int mma_warps = 16;       // its warps per block
};

// The batch arrays of one forward step, on the device.
struct DeviceBatch {
  const memra_forward_batch* source = nullptr;
  const int32_t* source_ids = nullptr;
  int32_t num_tokens = 0;
  CUdeviceptr ids = 0, positions = 0, seq_index = 0, block_tables = 0, logits_rows = 0;
  // Plugin ops' batch arrays (ops_named.cpp), uploaded at the first op of the step that needs them.
  CUdeviceptr seq_lens = 0, state_slots = 0, snapshot_slots = 0;
  // Per token row: the first position any row of the step writes for its sequence (K/V
  // before it are earlier steps' and may be read before the RoPE + KV write finishes).
  CUdeviceptr fresh_from = 0;
  // Prompt and generated rows of a matmul over this batch (ops_matmul.cpp), built at
  // first use: [0] the batch's token rows, [1] its gathered logits rows. Device lists
  // (prompt rows, then generated rows) only when both kinds are present.
  struct RowSplit {
    bool built = false;
    int32_t prompt = 0, generated = 0;
    CUdeviceptr prompt_rows = 0, generated_rows = 0;
  };
  RowSplit row_split[2];
  // Prefill attention (ops_attention.cpp): the step's prompt rows as the tasks of
  // kernels/attention/prefill_attention_mma.cu and the other rows for the decode
  // kernel, built at first use for a (heads, kv_heads) layout.
  struct AttentionPlan {
    bool built = false;
    int32_t heads = 0, kv_heads = 0, ctas = 0, generated = 0;
    CUdeviceptr tasks = 0, generated_rows = 0;
  };
  AttentionPlan attention_plan;
  // The split-KV decode attention's partial results (ops_attention.cpp), one buffer the
  // step's layers reuse in turn (stream order keeps them apart): a prompt step of long
  // rows would otherwise take rows x heads x chunks x head_dim floats per layer.
  CUdeviceptr part_o = 0, part_ml = 0;
  uint64_t part_o_bytes = 0, part_ml_bytes = 0;
};

class CudaBackend {
 public:
  explicit CudaBackend(const BackendOptions& options);
  ~CudaBackend();
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Status open();
  const memra_backend_ops* ops() const { return &ops_; }
  const std::string& last_error() const { return last_error_; }
  memra_status fail(memra_status code, std::string message);
  memra_status fail(const Error& e);
  void log(memra_log_level level, const std::string& message) const;

  memra_status device_info(memra_device_info* out);
  memra_status memory_info(uint64_t* free, uint64_t* total);  // cuMemGetInfo
  memra_status upload_weights(const memra_weight_set* set);
  memra_status allocate_kv(const KvCacheConfig& kv);
  memra_status begin_step();
  // Step slots (backend.hpp begin_step): two sets of step scratch so a
  // pipeline stage can take the next step of one group of sequences while the other
  // group's step is still running on its stream.
  memra_status begin_step_slot(int32_t slot);
  memra_status wait_logits(int32_t slot);
  memra_status copy_kv_block(int32_t pool, int32_t from, int32_t to);
  // Pipeline hand-off from another backend's tensor (peer_copy.cpp).
  memra_status copy_from_backend(CudaBackend& from, CUdeviceptr dst, CUdeviceptr src, uint64_t bytes);
  memra_status prepare_batch(const memra_forward_batch* batch);  // peer_copy.cpp
  memra_status make_current();

  // Memory and kernel services.
  memra_status memory_alloc(memra_memory_location location, uint64_t bytes, memra_buffer* out);
  void memory_free(memra_buffer* buffer);
  memra_status copy_to_device(void* dst, const void* src, uint64_t bytes);
  memra_status copy_to_host(void* dst, const void* src, uint64_t bytes);
  memra_status synchronize();
  memra_status kernel_module_load(const char* name, memra_kernel_module** out);
  memra_status kernel_module_compile(const memra_nvrtc_request* request, memra_kernel_module** out);
  memra_status kernel_get(memra_kernel_module* module, const char* name, memra_kernel** out);
  memra_status kernel_launch(memra_kernel* kernel, const memra_launch_config* config, void** args);
  // <path> (a plugin's own fatbin), loaded once; same rules as the kernel directory's.
  memra_status kernel_module_load_file(const char* path, memra_kernel_module** out);
  bool nvrtc_last_cache_hit() const { return nvrtc_.last_cache_hit(); }
  // A plugin's kernel descriptors go into the registry (backend.hpp register_kernels).
  // services: the kernel services the plugin loads its modules through (the modules its
  // device entries name must be theirs).
  memra_status register_plugin_kernels(const char* plugin_name, memra_plugin_ctx* ctx, RegisterKernelsFn fn, int32_t* added,
                                       const void* services = nullptr);
  const KernelRegistry& registry() const { return *registry_; }
  // Counters for tests and tools.
  BackendStats stats() const;

  // Ops (ops_*.cpp).
  memra_status tensor_create(int32_t ndim, const int64_t* shape, memra_tensor* out);
  memra_status embedding(const memra_weight* table, const memra_forward_batch* batch, float scale, memra_tensor* out);
  memra_status rms_norm(const memra_tensor* x, const memra_weight* w, float eps, float unit_offset, memra_tensor* out);
  memra_status add_rms_norm(const memra_tensor* x, memra_tensor* residual, const memra_weight* w, float eps,
                            float unit_offset, memra_tensor* out);
  memra_status add(const memra_tensor* a, const memra_tensor* b, memra_tensor* out);
  memra_status matmul(const memra_tensor* x, const memra_weight* w, const memra_weight* bias, memra_tensor* out);
  memra_status gated_activation(memra_activation act, const memra_tensor* gate, const memra_tensor* up, memra_tensor* out);
  memra_status attention(const memra_attention_params* p, const memra_forward_batch* batch, memra_tensor* q,
                         memra_tensor* k, const memra_tensor* v, memra_tensor* out);
  memra_status gather_logit_rows(const memra_tensor* x, const memra_forward_batch* batch, memra_tensor* out);
  memra_status logits_output(const memra_tensor* logits, const memra_forward_batch* batch);
  // Draft heads' hidden rows (ABI 2.9): uploaded from, and copied to, the batch's host
  // arrays; an output lands at the step's next synchronisation (logits_output's or synchronize()).
  memra_status rows_input(const memra_forward_batch* batch, memra_tensor* out);
  memra_status rows_output(const memra_tensor* x, const memra_forward_batch* batch);
  // Ops by name and recurrent state (ops_named.cpp).
  memra_status op_find(const char* name, uint32_t attrs_version, const memra_op** out);
  memra_status op_run(const memra_op* op, const memra_op_args* args);
  // A family plugin's ops (Backend::register_ops): each op's prepare_cuda, with the
  // caller having bound this backend's kernel services.
  memra_status register_plugin_ops(std::span<const ops::PluginOp> ops, std::vector<std::string>* refused);
  memra_status moe_ffn(const memra_op_args& args);  // ops_moe.cpp
  bool moe_has_gemv(const memra_weight& stacked);  // the scheme's module has memra_moe_gemv_<s>
  memra_status moe_grouped_rows(const memra_weight& stacked, const memra_tensor& plan, int32_t groups, const memra_tensor& in,
                                int32_t in_div, memra_tensor& out, int64_t out_stride);
  memra_status moe_stacked_rows(const memra_weight& stacked, const memra_tensor& routes, int32_t top_k, int32_t slot0, int32_t nslots,
                                const memra_tensor& in, int32_t in_base, int32_t in_div, memra_tensor& out, int64_t out_stride,
                                int32_t out_base, const memra_tensor& tile, const memra_tensor& ids, int64_t tile_rows);
  memra_status allocate_state(const RecurrentStateConfig& state);
  memra_status copy_state_slot(int32_t from, int32_t to);
  memra_status reset_state_slot(int32_t slot);
  // Device sampling (ops_sampling.cpp, backend.hpp sample_rows).
  memra_status sample_rows(const SampleRequest& request, int32_t* tokens);
  memra_status logits_rows_to_host(const int32_t* rows, int32_t n, float* dst);

 private:
  template <class... A>
  memra_status launch(const char* module, const char* kernel, unsigned gx, unsigned gy, unsigned block,
                      unsigned shared, A... args);
  template <class... A>
  memra_status launch_in(Module* module, const std::string& kernel, unsigned gx, unsigned gy, unsigned block, unsigned shared,
                         A... args);
  memra_status launch_raw(Kernel* k, unsigned gx, unsigned gy, unsigned block, unsigned shared, void** args);
  // A device matmul's entry in its plugin's module; GEMV entries of a PDL-aware
  // registration are launched programmatically (Kernel::pdl).
  Result<Kernel*> scheme_kernel(const SchemeInfo& s, const std::string& name, bool gemv);
  memra_status after_op(const char* what);
  // Device address of an uploaded weight (by its host address); 0 + error if absent.
  CUdeviceptr resolve(const memra_weight* w, memra_status* st);
  // The registry's kernel for the weight's scheme and row length (KernelRegistry::find).
  Result<SchemeInfo> scheme(const memra_weight* w) const;
  Result<const DeviceBatch*> device_batch(const memra_forward_batch* batch);
  Result<CUdeviceptr> rope_inv_freq(const memra_rope_params& p, float* attention_factor);
  Kernel* nvrtc_rms_norm(int64_t dim);

  // Step graphs (step_graph.cpp). With BackendOptions::step_graphs a step's launches and copies are recorded instead of issued; logits_output then
  // replays the previous step's CUDA graph when the records are identical (same
  // kernels, grids and argument bytes, same copy addresses: a decode step at fixed
  // shapes), else captures the records into a new graph (updating the old one in
  // place when it can). A graph runs the same kernels on the same arguments in the
  // same order, so the logits are bitwise the eager ones. Anything that needs the
  // host to wait or a foreign launch mid-step flushes the records and runs the rest
  // of the step eagerly.
  struct StepOp {
    Kernel* kernel = nullptr;  // nullptr: a copy
    unsigned gx = 0, gy = 0, block = 0, shared = 0;
    unsigned gz = 1, by = 1, bz = 1;  // 3-D launches (plugins' kernel_launch)
    std::vector<uint8_t> args;      // parameter bytes at their offsets (padding zero)
    std::vector<uint32_t> offsets;  // of each parameter
    CUdeviceptr device = 0;
    void* host = nullptr;
    uint64_t bytes = 0;
    bool to_device = false;
    bool plugin = false;  // launched by a plugin through kernel_launch
    bool operator==(const StepOp&) const = default;
  };
  bool recording() const { return recording_; }
  memra_status record_launch(Kernel* k, unsigned gx, unsigned gy, unsigned block, unsigned shared, void** args,
                             bool plugin = false);
  // The parameter layout (offset, size) of k from the driver, cached; empty if unknown.
  const std::vector<std::pair<uint32_t, uint32_t>>& param_layout(Kernel* k);
  memra_status record_copy(CUdeviceptr device, void* host, uint64_t bytes, bool to_device);
  // after_kernel: the previous op of the stream was a kernel (PDL may apply).
  memra_status issue(const StepOp& op, bool after_kernel = false);
  memra_status flush_recorded();  // issues the recorded ops eagerly; the step goes on eagerly
  memra_status run_step_graph();  // issues the step as a graph (replayed or captured)
  void release_graph();

  bool graph_enabled_ = false, recording_ = false;
  std::vector<StepOp> step_ops_;
  // The step graphs of the last few step shapes (a speculative decode alternates target
  // verify steps and draft-head steps): replayed when a step's ops are one's exactly,
  // updated in place when they have its topology, else captured anew over the least used.
  struct CachedGraph {
    CUgraphExec exec = nullptr;
    std::vector<StepOp> ops;
    uint64_t used = 0;
  };
  static constexpr size_t kCachedGraphs = 8;
  std::vector<CachedGraph> graphs_;
  uint64_t graph_clock_ = 0;
  std::unordered_map<Kernel*, std::vector<std::pair<uint32_t, uint32_t>>> param_layouts_;  // offset, size

  BackendOptions options_;
  std::string kernel_dir_, cache_dir_;
  DeviceContext ctx_;
  std::unique_ptr<KernelModules> modules_;
  NvrtcCompiler nvrtc_{"", ""};
  std::unique_ptr<StepArena> arena_;
  std::unique_ptr<PinnedStaging> staging_;
  bool sync_each_op_ = false;

  struct WeightCopy {
    CUdeviceptr ptr = 0;
    uint64_t bytes = 0;
  };
  std::vector<CUdeviceptr> weight_blobs_;
  std::unordered_map<const void*, WeightCopy> weights_;

  KvCacheConfig kv_{};  // dtype F32 or BF16
  CUdeviceptr k_cache_ = 0, v_cache_ = 0;
  RecurrentStateConfig state_;
  std::vector<CUdeviceptr> state_cache_;  // per layer: [slots][state_.layer_bytes[l]] (0: none)

  std::vector<std::unique_ptr<DeviceBatch>> batches_;  // this step's
  struct RopeEntry {
    std::vector<char> key;
    CUdeviceptr inv_freq = 0;
    float attention_factor = 1.0f;
  };
  std::vector<RopeEntry> ropes_;
  std::map<int64_t, Kernel*> nvrtc_norms_;  // dim -> kernel (nullptr: not available)
  std::vector<void*> host_buffers_;

  // Step slots (step_slots.cpp). arena_, staging_ and batches_ are the current slot's;
  // the other slot's are parked in slots_, step graph included (each slot replays its own
  // decode step). Slot steps hand their logits over asynchronously: logits_output
  // queues the copy after the step, wait_logits(slot) waits for it.
  static constexpr int32_t kStepSlots = 2;
  struct StepSlot {
    std::unique_ptr<StepArena> arena;
    std::unique_ptr<PinnedStaging> staging;
    std::vector<std::unique_ptr<DeviceBatch>> batches;
    CUevent done = nullptr;          // recorded when the backend moved on to the other slot
    bool done_pending = false;
    CUevent logits_ready = nullptr;  // after the slot's last queued logits copy
    struct Pending {
      const void* src;               // pinned host memory the queued copy fills
      void* dst;                     // the batch's host logits, or sample_rows' tokens
      uint64_t bytes;
    };
    std::vector<Pending> pending;
    std::vector<std::pair<void*, uint64_t>> logits_host;  // pinned, reused step to step
    std::vector<CachedGraph> graphs;  // the slot's step graphs, parked while the other slot runs
  };
  memra_status switch_slot(int32_t slot);
  // A step's start: the current slot's scratch and batch uploads reclaimed, recording
  // (a step graph) on unless options_.step_graphs is off or sync_each_op on.
  void reset_step_scratch();
  memra_status queue_logits(CUdeviceptr logits, void* dst, uint64_t bytes);
  // A slot step's device-to-host copy into `staged` (pinned, valid until the slot's next
  // step), delivered to `dst` by wait_logits.
  memra_status queue_to_host(void* staged, CUdeviceptr src, void* dst, uint64_t bytes);
  void release_slots();
  StepSlot slots_[kStepSlots];
  int32_t slot_ = 0;
  bool async_logits_ = false;
  struct RowsCopy {
    void* staging;
    float* dst;
    uint64_t bytes;
  };
  std::vector<RowsCopy> pending_rows_;  // rows_output copies waiting for the step's synchronisation
  void deliver_rows();

  int64_t graph_replays_ = 0, graph_captures_ = 0;
  // Plugin kernels: matmul calls into plugins, and their launches by how they ran.
  int64_t plugin_matmuls_ = 0, plugin_launches_replayed_ = 0, plugin_launches_captured_ = 0, plugin_launches_eager_ = 0;
  std::unique_ptr<KernelRegistry> registry_;
  // Plugin ops (register_plugin_ops); their handles, so addresses stay put. unavailable:
  // why the op cannot run here ("" when it can).
  struct PluginOpEntry {
    ops::PluginOp op;
    void* kernel_data = nullptr;
    std::string unavailable;
  };
  std::deque<PluginOpEntry> plugin_ops_;
  memra_status run_plugin_op(const PluginOpEntry& op, const memra_op_args* args);
  Error no_kernel(const std::string& scheme, int64_t cols) const;
  std::string last_error_;
  memra_backend_ops ops_{};

  // Prefill GEMM (ops_matmul.cpp): prompt rows through the tensor-core GEMM,
  // generated rows through the GEMV. Scratch buffers live across steps (freed
  // stream-ordered when they grow) so a long prefill does not grow the step arena.
  struct GemmBuffer {
    CUdeviceptr ptr = 0;
    uint64_t bytes = 0;
    ~GemmBuffer();
  };
  memra_status gemm_buffer(GemmBuffer& b, uint64_t bytes);
  Result<const DeviceBatch::RowSplit*> matmul_split(int64_t m);
  memra_status matmul_gemv(const SchemeInfo& s, CUdeviceptr w, int64_t rows, int64_t cols, CUdeviceptr x, int64_t m,
                           CUdeviceptr y, CUdeviceptr bias);
  memra_status matmul_gemm(const SchemeInfo& s, CUdeviceptr w, int64_t rows, int64_t cols, CUdeviceptr x, int64_t m,
                           CUdeviceptr row_index, CUdeviceptr y, CUdeviceptr bias);
  memra_status matmul_rows_gemv(const SchemeInfo& s, CUdeviceptr w, int64_t rows, int64_t cols, CUdeviceptr x, int64_t n,
                                CUdeviceptr row_index, CUdeviceptr y, CUdeviceptr bias);
  memra_status matmul_plugin(const SchemeInfo& s, CUdeviceptr w, int64_t rows, int64_t cols, CUdeviceptr x, int64_t m,
                             CUdeviceptr y);
  GemmBuffer gemm_x_, gemm_w_, gemm_rows_;
  // BackendOptions::overlap_dequant (eager cuBLASLt prompt steps): the weight planes the
  // side stream fills a matmul ahead, taken in turn; plane b is filled after plane_read_[b]
  // (its last product) and read after plane_ready_[b].
  struct DequantPipe {
    CUstream side = nullptr;
    GemmBuffer planes[2];
    CUevent ready[2] = {nullptr, nullptr}, read[2] = {nullptr, nullptr};
    bool read_pending[2] = {false, false};
    int next = 0;
  } pipe_;
  memra_status pipe_open();
  void pipe_close();
  // Plane b of at least `bytes`: both streams drained before a plane is replaced.
  memra_status pipe_plane(int b, uint64_t bytes);
  // memra_gemm_dequant_<scheme> into plane b on the side stream, after the plane's last
  // product (profiled like the step's own launches).
  memra_status pipe_launch(int b, Kernel* k, unsigned gx, unsigned block, void** args);
  // The prompt-row GEMM of bf16 weights in single-pass mode through cuBLASLt
  // (cublaslt_gemm.hpp), opened at its first use; nullptr: not installed or turned off.
  CublasLtGemm* cublaslt();
  std::unique_ptr<CublasLtGemm> cublaslt_;
  bool cublaslt_opened_ = false;
  std::set<std::pair<int64_t, int64_t>> cublaslt_refused_;  // shapes whose refusal was logged
  // Matmuls over prepared activations (ops_matmul.cpp): rows of x quantised into step
  // scratch once, as int8x32 blocks for the integer GEMVs (q: codes, meta: {d, s};
  // gemv_int8_ref.hpp) or as the fp8 GEMV's rows (q: the bf16 plane, meta: 2^(120 - E)
  // per group; fp8_act_ref.hpp), and reused by the next matmuls over the same rows
  // (q/k/v, gate/up) while no other write happened: write_epoch_ counts launches and
  // copies into device memory.
  enum class ActFormat { none, int8x32, bf16s128 };
  struct QuantizedRows {
    bool valid = false;
    ActFormat format = ActFormat::none;
    CUdeviceptr x = 0, row_index = 0, q = 0, meta = 0;
    int64_t m = 0, cols = 0;
    uint64_t epoch = 0;  // write_epoch_ after the matmul that last used them
  };
  // Step scratch for m rows of `cols` in format f (not yet written; epoch 0).
  Result<QuantizedRows> alloc_act_rows(ActFormat f, CUdeviceptr x, CUdeviceptr row_index, int64_t m, int64_t cols);
  Result<const QuantizedRows*> quantized_rows(ActFormat f, CUdeviceptr x, int64_t cols, CUdeviceptr row_index, int64_t m,
                                              uint64_t entry_epoch);
  // The generated rows of an int8x32 or fp8 matmul: quantized_rows, then its GEMV.
  memra_status matmul_prepared(const SchemeInfo& s, CUdeviceptr w, int64_t rows, int64_t cols, CUdeviceptr x,
                               CUdeviceptr row_index, int64_t m, CUdeviceptr y, CUdeviceptr bias, uint64_t entry_epoch);
  memra_status matmul_gemv8(const SchemeInfo& s, CUdeviceptr w, int64_t rows, int64_t cols, const QuantizedRows& a,
                            CUdeviceptr y, CUdeviceptr bias, uint64_t entry_epoch);
  memra_status matmul_gemv_fp8(const SchemeInfo& s, CUdeviceptr w, int64_t rows, int64_t cols, const QuantizedRows& a,
                               CUdeviceptr y, CUdeviceptr bias, uint64_t entry_epoch);
  memra_status matmul_mma(const SchemeInfo& s, CUdeviceptr w, int64_t rows, int64_t cols, int64_t m,
                          std::span<const CUdeviceptr> xs, const uint64_t (&in_lo)[2], const uint64_t (&in_hi)[2],
                          CUdeviceptr y, CUdeviceptr bias, uint64_t entry_epoch);
  QuantizedRows act_rows_;
  uint64_t write_epoch_ = 0;
  // The last recorded GEMV launch over GemvMats (the int8 GEMV's, or the bf16 tensor-core
  // GEMV's; step_ops_.size() after it), which the next matmul over the same activation
  // operands may join (gemv_merge). Invalid once the records are issued or cleared.
  struct GemvMerge {
    bool valid = false;
    size_t ops = 0;
    const Kernel* kernel = nullptr;
    uint64_t in_lo[2] = {}, in_hi[2] = {};  // the activation operands' bytes (x; or q and meta)
    int64_t m = 0, cols = 0, row_bytes = 0;
    uint64_t epoch = 0;  // write_epoch_ after the launch
    int n = 0;
    ref::GemvMats ms{};
    uint64_t out_lo[ref::GemvMats::kMax] = {}, out_hi[ref::GemvMats::kMax] = {};
  };
  GemvMerge gemv_merge_;
  // The matrices of the launch that serves this matmul (groups: its row groups): the last
  // recorded launch of kernel k with this one appended when they may share it (same
  // operands, disjoint outputs, nothing recorded or written between: entry_epoch is
  // write_epoch_ when this matmul began; BackendOptions::fuse_decode),
  // else this matmul alone. The previous record is dropped when merged: the caller
  // launches the returned matrices and then calls gemv_merge_recorded.
  const ref::GemvMats& gemv_merge(const Kernel* k, const uint64_t (&in_lo)[2], const uint64_t (&in_hi)[2], int64_t m,
                                  int64_t cols, int64_t row_bytes, CUdeviceptr w, int64_t rows, CUdeviceptr y,
                                  CUdeviceptr bias, int64_t groups, uint64_t entry_epoch);
  void gemv_merge_recorded() {
    gemv_merge_.valid = recording_;
    gemv_merge_.ops = step_ops_.size();
    gemv_merge_.epoch = write_epoch_;
  }

  // Per-kernel decode profile (step_profile.cpp, MEMRA_CUDA_PROFILE=1): graphs off,
  // each launch of a decode step between two events, summed per kernel name.
  struct ProfileSpan {
    const Kernel* kernel;
    CUevent start, end;
  };
  struct ProfileTotal {
    int64_t count = 0;
    double ms = 0;
  };
  void profile_init();
  CUevent profile_event();
  // (stream: NULL = the backend's)
  memra_status profile_launch(Kernel* k, unsigned gx, unsigned gy, unsigned block, unsigned shared, void** args,
                              CUstream stream = nullptr);
  void profile_collect();  // the previous step's spans (its work has been waited for)
  void profile_report();   // the table, on stderr, when the backend closes
  // MEMRA_CUDA_PROFILE=1: decode steps; =prefill: steps with prompt rows. profile_step_: this step is profiled.
  bool profile_ = false, profile_prefill_ = false, profile_step_ = true;
  std::vector<ProfileSpan> profile_pending_;
  std::vector<CUevent> profile_events_;
  std::map<std::string, ProfileTotal> profile_totals_;
  int64_t profile_steps_ = 0;
  // Fused quantisation (ops_basic.cpp): add_rms_norm, the gated activations (and the
  // decode attention, int8x32 only, ops_attention.cpp) write their output also as int8x32
  // blocks when the model has integer-activation weights,
  // else as the fp8 GEMV's rows when it has fp8 weights, for generated rows, so the next
  // matmul finds them in act_rows_. fused_act_format says which (none: no fusion);
  // fused_act_rows returns the buffers to fill; fused_act_rows_done makes them act_rows_
  // after the producer's launch.
  // The prepared activation format the uploaded weights take per row length (int8x32
  // first): what a producer of rows of that length writes beside them (fused_act_format).
  std::unordered_map<int64_t, ActFormat> act_format_by_cols_;
  Result<ActFormat> fused_act_format(int64_t m, int64_t cols);
  Result<const QuantizedRows*> fused_act_rows(ActFormat f, CUdeviceptr out, int64_t m, int64_t cols);
  void fused_act_rows_done(const QuantizedRows& rows);
  QuantizedRows fused_pending_;
  int64_t fused_act_quantisations_ = 0, merged_gemv_launches_ = 0;
  // Raises k's dynamic shared memory limit to `bytes` (once; the default is 48 KB);
  // UNSUPPORTED past the device's opt-in limit.
  memra_status allow_dynamic_smem(Kernel* k, uint64_t bytes);
  // Whether the device gives a block the prefill attention's shared memory at head_dim 256
  // (192 KB: sm_90a yes, sm_120a no).
  bool prefill_hd256_ok();
  int prefill_hd256_ = -1;  // unknown, 0, 1
  // The logits tensor of this step's logits_output, kept on the device for sample_rows
  // and logits_rows_to_host (ops_sampling.cpp) when the batch asked for no host copy.
  CUdeviceptr kept_logits_ = 0;
  int64_t kept_rows_ = 0, kept_vocab_ = 0;

  // Prefill attention (ops_attention.cpp): prompt rows through the tensor-core kernel,
  // the others through the decode kernel.
  Result<const DeviceBatch::AttentionPlan*> attention_plan(DeviceBatch& db, int32_t heads, int32_t kv_heads);
  Result<CUdeviceptr> upload_step_ints(const int32_t* data, size_t count);
  memra_status decode_attention(const memra_attention_params* p, const DeviceBatch& db, CUdeviceptr tables, int32_t entries, CUdeviceptr rows,
                                int32_t max_chunks, CUdeviceptr q, CUdeviceptr kc, CUdeviceptr vc, CUdeviceptr out,
                                const QuantizedRows* fused = nullptr);
};

template <class... A>
memra_status CudaBackend::launch_in(Module* module, const std::string& kernel, unsigned gx, unsigned gy, unsigned block, unsigned shared,
                                    A... args) {
  auto k = modules_->get(module, kernel);
  if (!k) return fail(k.error());
  void* argv[] = {static_cast<void*>(&args)...};
  const memra_status st = launch_raw(*k, gx, gy, block, shared, argv);
  return st != MEMRA_OK ? st : after_op(kernel.c_str());
}

// Launches module/kernel on the backend's stream with the given arguments (by value).
template <class... A>
memra_status CudaBackend::launch(const char* module, const char* kernel, unsigned gx, unsigned gy, unsigned block,
                                 unsigned shared, A... args) {
  auto k = modules_->kernel(module, kernel);
  if (!k) return fail(k.error());
  void* argv[] = {static_cast<void*>(&args)...};
  const memra_status st = launch_raw(*k, gx, gy, block, shared, argv);
  return st != MEMRA_OK ? st : after_op(kernel);
}

}  // namespace memra::backend::cuda
