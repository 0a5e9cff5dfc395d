// Attention of the CUDA backend: RoPE fused with the paged-KV write (every row,
// first), then per row by its prompt flag (memra_forward_batch.prompt_tokens), as the
// matmul does:
//  - prompt rows: the tensor-core prefill kernel (kernels/attention/
//    prefill_attention_mma.cu, head_dim 64 or 128), whose rows are bitwise the same
//    however the prompt is chunked and whatever else the step holds;
//  - generated rows (decode, verify; every row when the flags are absent, and prompt
//    rows of other head sizes): split-KV attention (fixed chunks
//    of kChunk positions, kernels/attention/paged_attention.cu) and the chunk merge,
//    over those rows only (a row list), bitwise what a decode-only step computes.
//    In a decode-only step with integer-activation weights, the kernel that writes the
//    output also writes the o projection's int8x32 rows (ops_basic.cpp's fused rows).
// An f16 or bf16 KV layer (KvLayerConfig::dtype) takes each kernel's _f16 / _bf16 twin: the
// write rounds K and V to it (round to nearest even), the readers convert them exactly to f32.
// An fp8 layer (_fp8) quantises each (position, kv head) row with its scale (head_dim a
// multiple of 16); the readers convert the codes exactly and apply the rows' scales.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "host/backend/cuda/cu_error.hpp"
#include "host/backend/cuda/cuda_backend.hpp"
#include "kernels/attention/paged_attention_layout.hpp"
#include "kernels/attention/prefill_attention_plan.hpp"
#include "kernels/rope/rope_ref.hpp"

namespace memra::backend::cuda {
namespace {
constexpr int32_t kChunk = attn::kDecodeChunk;
CUdeviceptr dptr(const memra_tensor* t) { return reinterpret_cast<CUdeviceptr>(t->data); }

// The kernels' name suffix for a KV element type (allocate_kv accepted it).
const char* kv_kernel_suffix(memra_dtype dtype) {
  return dtype == MEMRA_DTYPE_F16 ? "_f16" : dtype == MEMRA_DTYPE_BF16 ? "_bf16" : dtype == MEMRA_DTYPE_F8_E4M3 ? "_fp8" : "";
}

// Whether the decode chunk kernel writes the fp8 GEMV's rows beside its output: only when
// it writes the output itself (every row one chunk) and a kv head's q-head group is whole
// 128-element groups (paged_attention.cu).
bool chunk_writes_fp8_rows(int32_t max_chunks, int32_t group, int32_t head_dim) {
  return max_chunks == 1 && (group * head_dim) % 128 == 0;
}

int32_t chunks_of(int32_t pos, int32_t window) {
  const int32_t first = window > 0 ? std::max(0, pos - window + 1) : 0;
  return (pos - first + 1 + kChunk - 1) / kChunk;
}
}  // namespace

// Step-scoped device copy of `count` int32 (staging + arena; recorded when a graph is
// being recorded).
Result<CUdeviceptr> CudaBackend::upload_step_ints(const int32_t* data, size_t count) {
  const uint64_t bytes = std::max<uint64_t>(4, static_cast<uint64_t>(count) * 4u);
  if (recording_ && !staging_->fits(bytes))
    if (flush_recorded() != MEMRA_OK) return make_error(ErrorCode::internal, last_error_);
  auto host = staging_->alloc(bytes);
  if (!host) return host.error();
  std::memcpy(*host, data, count * 4u);
  auto dev = arena_->alloc(bytes);
  if (!dev) return dev.error();
  if (recording_) {
    (void)record_copy(*dev, *host, bytes, true);
  } else {
    const CUresult r = cuMemcpyHtoDAsync(*dev, *host, bytes, ctx_.stream());
    if (r != CUDA_SUCCESS) return make_error(ErrorCode::internal, cu_error(r, "attention plan upload"));
  }
  return *dev;
}

Result<const DeviceBatch::AttentionPlan*> CudaBackend::attention_plan(DeviceBatch& db, int32_t heads, int32_t kv_heads) {
  DeviceBatch::AttentionPlan& ap = db.attention_plan;
  if (ap.built && ap.heads == heads && ap.kv_heads == kv_heads) return &ap;
  const memra_forward_batch* b = db.source;
  attn::PrefillPlan plan;
  const std::string err = attn::build_prefill_plan(b->num_tokens, b->positions, b->seq_index, b->prompt_tokens, heads,
                                                   kv_heads, plan);
  if (!err.empty()) return make_error(ErrorCode::invalid_argument, "attention: " + err);
  ap = DeviceBatch::AttentionPlan{};
  ap.heads = heads;
  ap.kv_heads = kv_heads;
  ap.ctas = plan.ctas;
  ap.generated = static_cast<int32_t>(plan.generated.size());
  if (ap.ctas > 0) {
    auto t = upload_step_ints(plan.tasks.data(), plan.tasks.size());
    if (!t) return t.error();
    ap.tasks = *t;
    if (ap.generated > 0) {
      auto g = upload_step_ints(plan.generated.data(), plan.generated.size());
      if (!g) return g.error();
      ap.generated_rows = *g;
    }
  }
  ap.built = true;
  return &ap;
}

bool CudaBackend::prefill_hd256_ok() {
  if (prefill_hd256_ < 0) {
    int optin = 0;
    const CUresult r = cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ctx_.device());
    prefill_hd256_ = r == CUDA_SUCCESS && optin >= attn::prefill_attention_smem_bytes(256) ? 1 : 0;
  }
  return prefill_hd256_ == 1;
}

// Split-KV decode attention over `entries` rows: rows[i] (or i when rows is 0).
memra_status CudaBackend::decode_attention(const memra_attention_params* p, const DeviceBatch& db, CUdeviceptr tables, int32_t entries,
                                           CUdeviceptr rows, int32_t max_chunks, CUdeviceptr q, CUdeviceptr kc,
                                           CUdeviceptr vc, CUdeviceptr out, const QuantizedRows* fused) {
  const int32_t heads = p->num_heads, kv_heads = p->num_kv_heads, head_dim = p->head_dim;
  const int32_t block_size = static_cast<int32_t>(kv_.block_size), max_blocks = db.source->max_blocks_per_seq;
  if (head_dim % 8 != 0 || head_dim > attn::kDecodeMaxHeadDim)
    return fail(MEMRA_ERR_UNSUPPORTED, "attention: the decode kernel needs head_dim a multiple of 8, at most " +
                                           std::to_string(attn::kDecodeMaxHeadDim) + " (got " + std::to_string(head_dim) + ")");
  const uint64_t n = static_cast<uint64_t>(entries) * static_cast<uint64_t>(heads);
  // One chunk per row (short rows): the chunk kernel writes `out` itself, no merge pass.
  const bool merge = max_chunks > 1;
  CUdeviceptr part_o = 0, part_ml = 0;
  if (merge) {
    // The step's buffer when it is large enough (every layer of a model needs the same).
    auto& step = const_cast<DeviceBatch&>(db);
    const uint64_t o_bytes = n * static_cast<uint64_t>(max_chunks) * static_cast<uint64_t>(head_dim) * 4u;
    const uint64_t ml_bytes = n * static_cast<uint64_t>(max_chunks) * 2u * 4u;
    if (step.part_o_bytes < o_bytes) {
      auto po = arena_->alloc(o_bytes);
      if (!po) return fail(po.error());
      step.part_o = *po, step.part_o_bytes = o_bytes;
    }
    if (step.part_ml_bytes < ml_bytes) {
      auto pm = arena_->alloc(ml_bytes);
      if (!pm) return fail(pm.error());
      step.part_ml = *pm, step.part_ml_bytes = ml_bytes;
    }
    part_o = step.part_o, part_ml = step.part_ml;
  }
  // One block per (row, kv head, chunk) serves the kv head's whole q-head group; its
  // shared memory (paged_attention_layout.hpp) holds the scores and the chunk's K rows,
  // and the V rows beside them when that fits every arch (else V reuses K's space). The
  // layout never changes the arithmetic.
  const int32_t group = heads / kv_heads;
  const KvLayerConfig* geometry = kv_.layer(p->layer);
  const memra_dtype kv_dtype = geometry ? geometry->dtype : MEMRA_DTYPE_F32;
  if (kv_dtype == MEMRA_DTYPE_F8_E4M3 && head_dim % 16 != 0)
    return fail(MEMRA_ERR_UNSUPPORTED, "attention: an fp8 KV cache needs head_dim a multiple of 16 (got " + std::to_string(head_dim) + ")");
  if ((kc | vc) % 16 != 0) return fail(MEMRA_ERR_UNSUPPORTED, "attention: the decode kernel needs 16-byte aligned KV layers");
  const int kv_bytes = static_cast<int>(kv_element_bytes(kv_dtype));
  const bool v_separate =
      attn::decode_attention_smem_bytes(group, head_dim, kv_bytes, true) <= attn::kDecodeSmemOverlapLimit;
  const uint64_t shared64 = attn::decode_attention_smem_bytes(group, head_dim, kv_bytes, v_separate);
  const std::string chunk_name = std::string("memra_attention_chunk") + kv_kernel_suffix(kv_dtype);
  const char* chunk_kernel = chunk_name.c_str();
  {
    auto k = modules_->kernel("attention", chunk_kernel);
    if (!k) return fail(k.error());
    if (allow_dynamic_smem(*k, shared64) != MEMRA_OK)
      return fail(MEMRA_ERR_UNSUPPORTED, "attention: q-head group " + std::to_string(group) + " x head_dim " + std::to_string(head_dim) +
                                             ": " + last_error_);
  }
  // The rows fused for the o projection: int8x32 from whichever kernel writes `out`; the
  // fp8 GEMV's rows from the chunk kernel only (the caller passes them for one-chunk rows).
  const bool q8 = fused && fused->format == ActFormat::int8x32;
  const bool fp8 = fused && fused->format == ActFormat::bf16s128;
  if (fp8 && !chunk_writes_fp8_rows(max_chunks, group, head_dim))
    return fail(MEMRA_ERR_INTERNAL, "attention: fp8 rows fused into a merged or partial-group launch");
  const auto shared = static_cast<unsigned>(shared64);
  const unsigned group_rows = static_cast<unsigned>(entries) * static_cast<unsigned>(kv_heads);
  memra_status st = launch("attention", chunk_kernel, group_rows, static_cast<unsigned>(max_chunks),
                           static_cast<unsigned>(attn::kDecodeThreads), shared, q, kc, vc, heads, kv_heads, head_dim,
                           block_size, db.positions, db.seq_index, tables, max_blocks, p->scale,
                           p->sliding_window, p->logit_softcap, max_chunks, part_o, part_ml, rows,
                           options_.early_kv_reads ? db.fresh_from : CUdeviceptr{0},
                           static_cast<int32_t>(v_separate ? 1 : 0), merge ? CUdeviceptr{0} : out,
                           q8 && !merge ? fused->q : CUdeviceptr{0}, q8 && !merge ? fused->meta : CUdeviceptr{0},
                           fp8 ? fused->q : CUdeviceptr{0}, fp8 ? fused->meta : CUdeviceptr{0});
  if (st != MEMRA_OK || !merge) return st;
  return launch("attention", "memra_attention_combine", static_cast<unsigned>(n),
                static_cast<unsigned>(attn::decode_combine_slices(head_dim)),
                static_cast<unsigned>(attn::kDecodeThreads), 0, part_o, part_ml, db.positions, heads, head_dim,
                p->sliding_window, max_chunks, out, rows, q8 ? fused->q : CUdeviceptr{0},
                q8 ? fused->meta : CUdeviceptr{0});
}

Result<CUdeviceptr> CudaBackend::rope_inv_freq(const memra_rope_params& p, float* attention_factor) {
  // The table depends on every field: key on the struct's bytes (up to what the caller filled).
  const size_t n = std::min(p.struct_size, sizeof(memra_rope_params));
  std::vector<char> key(reinterpret_cast<const char*>(&p), reinterpret_cast<const char*>(&p) + n);
  for (const RopeEntry& e : ropes_)
    if (e.key == key) {
      *attention_factor = e.attention_factor;
      return e.inv_freq;
    }
  memra_rope_params full{};
  std::memcpy(&full, &p, n);
  const ref::RopeTable table = ref::rope_table(full);
  RopeEntry e;
  e.key = std::move(key);
  e.attention_factor = table.attention_factor;
  const uint64_t bytes = std::max<size_t>(1, table.inv_freq.size()) * 4u;
  CUresult r = cuMemAlloc(&e.inv_freq, bytes);
  if (r == CUDA_SUCCESS) r = cuMemcpyHtoD(e.inv_freq, table.inv_freq.data(), table.inv_freq.size() * 4u);
  if (r != CUDA_SUCCESS) return make_error(ErrorCode::internal, cu_error(r, "RoPE table upload"));
  ropes_.push_back(std::move(e));
  *attention_factor = ropes_.back().attention_factor;
  return ropes_.back().inv_freq;
}

memra_status CudaBackend::attention(const memra_attention_params* p, const memra_forward_batch* batch, memra_tensor* q,
                                    memra_tensor* k, const memra_tensor* v, memra_tensor* out) {
  if (!k_cache_) return fail(MEMRA_ERR_INVALID_ARGUMENT, "attention: the KV cache is not allocated");
  if (!MEMRA_STRUCT_HAS(p, memra_attention_params, rope)) return fail(MEMRA_ERR_ABI_MISMATCH, "attention: params struct too small");
  std::string why;
  const KvLayerConfig* geometry = kv_.attention_layer(*p, &why);  // the cache holds layers from first_layer on
  if (!geometry) return fail(MEMRA_ERR_INVALID_ARGUMENT, why);
  const auto local = static_cast<size_t>(p->layer - kv_.first_layer);
  if (p->num_kv_heads <= 0 || p->num_heads % p->num_kv_heads != 0)
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "attention: heads must be a multiple of kv_heads");
  // Host-side checks the CPU backend makes too, and the chunk count of the longest row.
  int32_t max_chunks = 1;
  for (int32_t t = 0; t < batch->num_tokens; ++t) {
    if (std::string e = kv_.token_blocks_error(*batch, *geometry, t, p->sliding_window); !e.empty())
      return fail(MEMRA_ERR_INVALID_ARGUMENT, std::move(e));
    max_chunks = std::max(max_chunks, chunks_of(batch->positions[t], p->sliding_window));
  }
  auto b = device_batch(batch);
  if (!b) return fail(b.error());
  const DeviceBatch& db = **b;
  // The layer's KV pool's tables (pool 0's first in the upload).
  const CUdeviceptr tables = db.block_tables + static_cast<uint64_t>(geometry->pool) * static_cast<uint64_t>(batch->num_seqs) *
                                                   static_cast<uint64_t>(batch->max_blocks_per_seq) * 4u;

  const int32_t heads = p->num_heads, kv_heads = p->num_kv_heads, head_dim = p->head_dim;
  const int32_t block_size = static_cast<int32_t>(kv_.block_size), max_blocks = batch->max_blocks_per_seq;
  const char* suffix = kv_kernel_suffix(geometry->dtype);
  const CUdeviceptr kc = k_cache_ + kv_.layer_offset(local);
  const CUdeviceptr vc = v_cache_ + kv_.layer_offset(local);

  CUdeviceptr inv_freq = 0;
  float attention_factor = 1.0f;
  int32_t rotary_dim = 0, neox = 1;
  if (p->rope) {
    auto f = rope_inv_freq(*p->rope, &attention_factor);
    if (!f) return fail(f.error());
    inv_freq = *f;
    rotary_dim = p->rope->rotary_dim;
    neox = p->rope->neox_style;
    if (rotary_dim <= 0 || rotary_dim > head_dim || rotary_dim % 2) return fail(MEMRA_ERR_INVALID_ARGUMENT, "attention: bad rotary_dim");
  }
  // Per-head q/k norms (2.4), fused into the RoPE + KV write.
  CUdeviceptr norm_w[2] = {0, 0};
  float norm_eps = 0.0f;
  if (MEMRA_STRUCT_HAS(p, memra_attention_params, qk_norm_eps)) {
    norm_eps = p->qk_norm_eps;
    const memra_weight* nw[2] = {p->q_norm, p->k_norm};
    for (int i = 0; i < 2; ++i) {
      if (!nw[i]) continue;
      if (nw[i]->dtype != MEMRA_DTYPE_F32 || nw[i]->ndim < 1 || nw[i]->shape[0] != head_dim)
        return fail(MEMRA_ERR_INVALID_ARGUMENT, std::string("attention: q/k norm weight ") + (nw[i]->name ? nw[i]->name : "?") +
                                                    " is not head_dim F32 floats");
      memra_status rs = MEMRA_OK;
      norm_w[i] = resolve(nw[i], &rs);
      if (rs != MEMRA_OK) return rs;
    }
  }
  const auto tokens = static_cast<unsigned>(batch->num_tokens);
  const std::string rope_kernel = std::string("memra_rope_kv_write") + suffix;
  memra_status st = launch("rope", rope_kernel.c_str(), tokens, static_cast<unsigned>(heads + kv_heads), 64, 0, dptr(q), dptr(k), dptr(v), heads, kv_heads,
                           head_dim, rotary_dim, neox, inv_freq, attention_factor, db.positions, db.seq_index,
                           tables, max_blocks, kc, vc, block_size, norm_w[0], norm_w[1], norm_eps);
  if (st != MEMRA_OK) return st;

  // Prompt rows to the prefill kernel, the others to the decode kernel.
  const bool flagged = MEMRA_STRUCT_HAS(batch, memra_forward_batch, prompt_tokens) && batch->prompt_tokens;
  const DeviceBatch::AttentionPlan* plan = nullptr;
  // head_dim 256 needs 192 KB of shared memory: where the device cannot give it (sm_120a),
  // prompt rows stay on the decode kernel.
  const bool prefill_dim = head_dim == 64 || head_dim == 128 || (head_dim == 256 && prefill_hd256_ok());
  if (flagged && prefill_dim) {
    // device_batch hands out the step's (non-const) DeviceBatch; the plan is cached in it.
    auto ap = attention_plan(const_cast<DeviceBatch&>(db), heads, kv_heads);
    if (!ap) return fail(ap.error());
    plan = *ap;
  }
  if (!plan || plan->ctas == 0) {
    // Decode rows only: with integer-activation weights the kernel that writes `out` also
    // writes it as the o projection's int8x32 rows (a 32-dim block within one head); with
    // fp8 weights, when every row has one chunk, the chunk kernel writes the fp8 GEMV's
    // rows (128-element groups within one kv head's q-head group).
    const QuantizedRows* fused = nullptr;
    const int64_t width = static_cast<int64_t>(heads) * head_dim;
    if (head_dim % 32 == 0) {
      auto f = fused_act_format(batch->num_tokens, width);
      if (!f) return fail(f.error());
      const bool fp8_rows = *f == ActFormat::bf16s128 && chunk_writes_fp8_rows(max_chunks, heads / kv_heads, head_dim);
      if (*f == ActFormat::int8x32 || fp8_rows) {
        auto rows = fused_act_rows(*f, dptr(out), batch->num_tokens, width);
        if (!rows) return fail(rows.error());
        fused = *rows;
      }
    }
    st = decode_attention(p, db, tables, batch->num_tokens, 0, max_chunks, dptr(q), kc, vc, dptr(out), fused);
    if (st == MEMRA_OK && fused) fused_act_rows_done(*fused);
    return st;
  }

  const std::string prefill_name = "memra_prefill_attention_hd" + std::to_string(head_dim) + suffix;
  const char* kernel = prefill_name.c_str();
  const auto smem = static_cast<unsigned>(attn::prefill_attention_smem_bytes(head_dim));
  auto pk = modules_->kernel("attention_prefill", kernel);
  if (!pk) return fail(pk.error());
  if (const memra_status sm = allow_dynamic_smem(*pk, smem); sm != MEMRA_OK) return sm;
  st = launch("attention_prefill", kernel, static_cast<unsigned>(plan->ctas), 1, static_cast<unsigned>(attn::kPrefillThreads),
              smem, dptr(q), kc, vc, heads, kv_heads, block_size, db.positions, tables, max_blocks, p->scale,
              p->sliding_window, p->logit_softcap, plan->tasks, dptr(out));
  if (st != MEMRA_OK || plan->generated == 0) return st;
  int32_t gen_chunks = 1;
  for (int32_t t = 0; t < batch->num_tokens; ++t)
    if (!batch->prompt_tokens[t]) gen_chunks = std::max(gen_chunks, chunks_of(batch->positions[t], p->sliding_window));
  return decode_attention(p, db, tables, plan->generated, plan->generated_rows, gen_chunks, dptr(q), kc, vc, dptr(out));
}

}  // namespace memra::backend::cuda
