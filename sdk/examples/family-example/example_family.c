/* The SDK's example family: a toy architecture with an op of its own, built out of tree
 * against the installed SDK headers only (CMakeLists.txt here, docs/PLUGINS.md, "Ops a
 * plugin brings"). Layer 0 is attention over the paged KV cache, layer 1 the plugin's op
 * example.decay_scan (example_scan.h) whose RECURRENT state is a decayed running sum, so
 * logits depend on the whole history through the state:
 *
 *   x  = token_embd[token]                         [tokens][DIM]
 *   x1 = x + attention(layer 0; q,k,v = x·Wq, x·Wk, x·Wv; 1 head of DIM, no RoPE)
 *   x2 = x1 + example.decay_scan(layer 1; decay DECAY; x1)  (state: float32[DIM] per sequence)
 *   logits = x2[logit rows] · output.weightᵀ        [rows][VOCAB]
 *
 * The op is the plugin's: its CPU reference below (the oracle, and what the CPU backend
 * runs), its CUDA kernel in example_scan.fatbin (loaded in prepare_cuda, launched with
 * argument sizes so the step graph captures it) and the cases memra-kernel-check runs.
 *
 * Weights (f32): token_embd.weight [VOCAB][DIM], blk.0.attn_{q,k,v}.weight [DIM][DIM],
 * output.weight [VOCAB][DIM]. The config reaches plan_create as the host's tests write
 * it (no HF config reading: a toy); its words turn on the refusals the engine must make:
 * "bad_state_kind" (group kind 99), "bad_op" (requires no_such_op), "bad_op_version"
 * (example.decay_scan v7). */
#include <memra/memra.h>

#include "example_scan.h"

#include <stdlib.h>
#include <string.h>

#define VOCAB 16
#define DIM 8
#define DECAY 0.75f

/* The CUDA kernel for one GPU backend: prepare_cuda runs once per backend, and the op's
 * runs there get their record back as env->kernel_data. */
typedef struct kernel_record {
  memra_kernel* scan;
  struct kernel_record* next;
} kernel_record;

/* memra-kernel-check's case buffers (scan_example), reused by each call. */
typedef struct example_case {
  example_scan_attrs_v1 attrs;
  int32_t positions[64], seq_index[64];
  int64_t in_shape[2], out_shape[2];
  float* x;
  const float* inputs[1];
} example_case;

struct memra_plugin_ctx {
  const memra_host_api* host;
  kernel_record* records;
  example_case cases;
};

struct memra_model_plan {
  memra_plugin_ctx* ctx;
  int32_t attn_layers[1], state_layers[1];
  memra_state_group groups[2];
  memra_op_requirement op;
};

enum { W_EMB, W_Q, W_K, W_V, W_OUT, W_COUNT };
static const char* const k_weight_names[W_COUNT] = {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight",
                                                    "blk.0.attn_v.weight", "output.weight"};

struct memra_model {
  memra_plugin_ctx* ctx;
  const memra_backend_ops* ops;
  const memra_weight* w[W_COUNT];
  const memra_op* scan;
};

static memra_status fail(memra_plugin_ctx* ctx, memra_status code, const char* message) {
  return ctx->host->error_report(ctx->host->ctx, code, message);
}

static memra_status copy_out(const char* text, char* buf, size_t buf_size, size_t* needed) {
  *needed = strlen(text) + 1;
  if (buf == NULL || buf_size < *needed) return MEMRA_ERR_INVALID_ARGUMENT;
  memcpy(buf, text, *needed);
  return MEMRA_OK;
}

static memra_status config_normalize(memra_plugin_ctx* ctx, const char* raw_json, char* buf, size_t buf_size,
                                     size_t* needed) {
  (void)ctx;
  return copy_out(raw_json, buf, buf_size, needed); /* tests hand it the config directly */
}

static memra_status tensor_name(memra_plugin_ctx* ctx, const char* format, const char* source_name, char* buf,
                                size_t buf_size, size_t* needed) {
  (void)ctx;
  (void)format;
  return copy_out(source_name, buf, buf_size, needed);
}

static memra_status plan_create(memra_plugin_ctx* ctx, const char* config_json, memra_model_plan** out) {
  if (config_json == NULL || out == NULL) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "plan_create: NULL argument");
  memra_model_plan* p = (memra_model_plan*)calloc(1, sizeof *p);
  if (p == NULL) return fail(ctx, MEMRA_ERR_OUT_OF_MEMORY, "plan_create: out of memory");
  p->ctx = ctx;
  p->attn_layers[0] = 0;
  p->state_layers[0] = 1;
  memra_state_group* kv = &p->groups[0];
  kv->struct_size = MEMRA_STATE_GROUP_STRUCT_SIZE;
  kv->kind = MEMRA_STATE_PAGED_KV;
  kv->num_layers = 1;
  kv->layers = p->attn_layers;
  kv->kv_heads = 1;
  kv->head_dim = DIM;
  memra_state_group* rec = &p->groups[1];
  rec->struct_size = MEMRA_STATE_GROUP_STRUCT_SIZE;
  rec->kind = strstr(config_json, "bad_state_kind") ? 99 : MEMRA_STATE_RECURRENT;
  rec->num_layers = 1;
  rec->layers = p->state_layers;
  rec->bytes_per_sequence = DIM * sizeof(float);
  rec->layout = EXAMPLE_SCAN_LAYOUT;
  p->op.struct_size = MEMRA_OP_REQUIREMENT_STRUCT_SIZE;
  p->op.name = strstr(config_json, "bad_op\"") ? "no_such_op" : EXAMPLE_SCAN_OP;
  p->op.version = strstr(config_json, "bad_op_version") ? 7u : EXAMPLE_SCAN_V1;
  *out = p;
  return MEMRA_OK;
}

static memra_status plan_info(const memra_model_plan* plan, memra_plan_info* out) {
  if (out == NULL || out->struct_size < MEMRA_PLAN_INFO_STRUCT_SIZE) return MEMRA_ERR_ABI_MISMATCH;
  out->vocab_size = VOCAB;
  out->num_layers = 2;
  out->inputs = MEMRA_INPUT_TOKEN_IDS;
  out->num_state_groups = 2;
  out->state_groups = plan->groups;
  out->num_encoders = 0;
  out->encoders = NULL;
  out->num_required_ops = 1;
  out->required_ops = &plan->op;
  out->layer_ranges = 1;
  return MEMRA_OK;
}

static memra_status plan_describe(const memra_model_plan* plan, char* buf, size_t buf_size, size_t* needed) {
  (void)plan;
  return copy_out("{\"plugin\":\"example\",\"layers\":[\"attention\",\"example.decay_scan\"]}", buf, buf_size, needed);
}

static void plan_destroy(memra_model_plan* plan) { free(plan); }

static memra_status model_create(const memra_model_plan* plan, const memra_weight_set* weights,
                                 const memra_backend_ops* ops, memra_model** out) {
  memra_plugin_ctx* ctx = plan->ctx;
  if (!MEMRA_STRUCT_HAS(ops, memra_backend_ops, op_run))
    return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example: the backend has no ops by name (ABI 2.1)");
  memra_model* m = (memra_model*)calloc(1, sizeof *m);
  if (m == NULL) return fail(ctx, MEMRA_ERR_OUT_OF_MEMORY, "model_create: out of memory");
  m->ctx = ctx;
  m->ops = ops;
  for (int i = 0; i < W_COUNT; ++i) {
    for (size_t j = 0; j < weights->count; ++j)
      if (strcmp(weights->weights[j].name, k_weight_names[i]) == 0) m->w[i] = &weights->weights[j];
    if (m->w[i] == NULL) {
      free(m);
      return fail(ctx, MEMRA_ERR_NOT_FOUND, "example: a weight is missing");
    }
  }
  memra_status s = ops->op_find(ops->ctx, EXAMPLE_SCAN_OP, EXAMPLE_SCAN_V1, &m->scan);
  if (s != MEMRA_OK) {
    free(m);
    return fail(ctx, s, "example: the backend has no example.decay_scan v1");
  }
  *out = m;
  return MEMRA_OK;
}

#define TRY(call)                         \
  do {                                    \
    memra_status s_ = (call);             \
    if (s_ != MEMRA_OK) return s_;        \
  } while (0)

static memra_status model_forward(memra_model* m, const memra_forward_batch* b) {
  const memra_backend_ops* o = m->ops;
  const int64_t rows[2] = {b->num_tokens, DIM};
  memra_tensor x, q, k, v, a, x1, h, x2, g, lg;
  memra_tensor* all[] = {&x, &q, &k, &v, &a, &x1, &h, &x2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) TRY(o->tensor_create(o->ctx, 2, rows, all[i]));
  /* Layer ranges (ABI 2.2): layer 0 (attention) leaves x1, layer 1 (decay_scan) takes it. */
  const int ranged = MEMRA_STRUCT_HAS(b, memra_forward_batch, num_carry_out) && b->layer_end > 0;
  const int first = ranged ? b->layer_begin : 0, last = ranged ? b->layer_end : 2;
  if (first < 0 || first >= last || last > 2) return fail(m->ctx, MEMRA_ERR_INVALID_ARGUMENT, "example: bad layer range");
  if (first == 1) {
    if (b->num_carry_in != 1 || b->carry_in == NULL) return fail(m->ctx, MEMRA_ERR_INVALID_ARGUMENT, "example: no carry");
    x1 = b->carry_in[0];
    goto layer1;
  }
  TRY(o->embedding(o->ctx, m->w[W_EMB], b, 1.0f, &x));
  TRY(o->matmul(o->ctx, &x, m->w[W_Q], NULL, &q));
  TRY(o->matmul(o->ctx, &x, m->w[W_K], NULL, &k));
  TRY(o->matmul(o->ctx, &x, m->w[W_V], NULL, &v));
  const memra_attention_params ap = {MEMRA_ATTENTION_PARAMS_STRUCT_SIZE, 0, 1, 1, DIM, 0.35355339f, 0, 0.0f, NULL};
  TRY(o->attention(o->ctx, &ap, b, &q, &k, &v, &a));
  TRY(o->add(o->ctx, &x, &a, &x1));
  if (last == 1) {
    if (b->carry_out == NULL || b->num_carry_out == NULL) return fail(m->ctx, MEMRA_ERR_INVALID_ARGUMENT, "example: no carry out");
    b->carry_out[0] = x1;
    *b->num_carry_out = 1;
    return MEMRA_OK;
  }
layer1:;
  const example_scan_attrs_v1 attrs = {sizeof(example_scan_attrs_v1), DECAY, DIM};
  const memra_tensor* ins[1] = {&x1};
  memra_tensor* outs[1] = {&h};
  memra_op_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = MEMRA_OP_ARGS_STRUCT_SIZE;
  args.layer = 1;
  args.attrs_version = EXAMPLE_SCAN_V1;
  args.attrs = &attrs;
  args.attrs_size = sizeof attrs;
  args.num_inputs = 1;
  args.num_outputs = 1;
  args.inputs = ins;
  args.outputs = outs;
  args.batch = b;
  TRY(o->op_run(o->ctx, m->scan, &args));
  TRY(o->add(o->ctx, &x1, &h, &x2));
  const int64_t grows[2] = {b->num_logits, DIM};
  const int64_t lrows[2] = {b->num_logits, VOCAB};
  TRY(o->tensor_create(o->ctx, 2, grows, &g));
  TRY(o->tensor_create(o->ctx, 2, lrows, &lg));
  TRY(o->gather_logit_rows(o->ctx, &x2, b, &g));
  TRY(o->matmul(o->ctx, &g, m->w[W_OUT], NULL, &lg));
  return o->logits_output(o->ctx, &lg, b);
}

static void model_destroy(memra_model* model) { free(model); }

/* ---- the op: example.decay_scan -------------------------------------------------- */

static const char* scan_args_error(const memra_op_args* a) {
  const example_scan_attrs_v1* at = (const example_scan_attrs_v1*)a->attrs;
  if (a->num_inputs != 1 || a->num_outputs != 1 || a->inputs == NULL || a->outputs == NULL || a->inputs[0] == NULL ||
      a->outputs[0] == NULL)
    return "example.decay_scan: takes one input and one output";
  const memra_tensor* x = a->inputs[0];
  const memra_tensor* y = a->outputs[0];
  const int64_t w = at->width;
  if (w <= 0 || x->ndim < 1 || y->ndim < 1 || x->shape[x->ndim - 1] != w || y->shape[y->ndim - 1] != w)
    return "example.decay_scan: x and y must be [tokens][width]";
  int64_t nx = 1, ny = 1;
  for (int32_t i = 0; i < x->ndim; ++i) nx *= x->shape[i];
  for (int32_t i = 0; i < y->ndim; ++i) ny *= y->shape[i];
  if (nx != w * a->batch->num_tokens || ny != nx) return "example.decay_scan: x and y must hold a row per token";
  return NULL;
}

static memra_status scan_check(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* a) {
  const char* why = scan_args_error(a);
  if (why != NULL) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, why);
  const example_scan_attrs_v1* at = (const example_scan_attrs_v1*)a->attrs;
  if (env->state_stride < (uint64_t)at->width * sizeof(float))
    return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "example.decay_scan: the layer keeps less state than width floats");
  return MEMRA_OK;
}

/* The CPU reference: rows in batch order, each updating its sequence's slot. */
static memra_status scan_run_cpu(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* a) {
  TRY(scan_check(ctx, env, a));
  const example_scan_attrs_v1* at = (const example_scan_attrs_v1*)a->attrs;
  const int64_t w = at->width;
  const float* x = (const float*)a->inputs[0]->data;
  float* y = (float*)a->outputs[0]->data;
  for (int32_t t = 0; t < a->batch->num_tokens; ++t) {
    float* s = (float*)((char*)env->state + (uint64_t)env->state_slots[env->seq_index[t]] * env->state_stride);
    for (int64_t i = 0; i < w; ++i) {
      const float v = at->decay * s[i] + x[t * w + i]; /* two roundings: -ffp-contract=off */
      s[i] = v;
      y[t * w + i] = v;
    }
  }
  return MEMRA_OK;
}

/* The fatbin holds SASS for these (CMakeLists.txt); elsewhere the op has no CUDA form. */
static int has_sass_for(const char* arch) {
  return arch != NULL && (strcmp(arch, "sm_90a") == 0 || strcmp(arch, "sm_120a") == 0);
}

static memra_status scan_prepare_cuda(memra_plugin_ctx* ctx, const memra_device_info* device, void** kernel_data) {
  if (device == NULL || kernel_data == NULL) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "prepare_cuda: NULL argument");
  if (!has_sass_for(device->arch)) return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example.decay_scan: no SASS for this GPU");
  if (ctx->host->kernel_module_load == NULL || ctx->host->kernel_get == NULL)
    return fail(ctx, MEMRA_ERR_UNSUPPORTED, "example: the host has no kernel services");
  memra_kernel_module* module = NULL;
  memra_status s = ctx->host->kernel_module_load(ctx->host->ctx, EXAMPLE_SCAN_MODULE, &module);
  if (s != MEMRA_OK) return s; /* the host reported why (e.g. example_scan.fatbin missing) */
  kernel_record* rec = (kernel_record*)calloc(1, sizeof *rec);
  if (rec == NULL) return fail(ctx, MEMRA_ERR_OUT_OF_MEMORY, "example: out of memory");
  rec->next = ctx->records;
  ctx->records = rec;
  s = ctx->host->kernel_get(ctx->host->ctx, module, EXAMPLE_SCAN_KERNEL, &rec->scan);
  if (s != MEMRA_OK) return s;
  *kernel_data = rec;
  return MEMRA_OK;
}

/* The CUDA form: one launch with argument sizes (recorded into the step's graph). */
static memra_status scan_run_cuda(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* a) {
  TRY(scan_check(ctx, env, a));
  const kernel_record* rec = (const kernel_record*)env->kernel_data;
  if (rec == NULL) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "example.decay_scan: not prepared on this backend");
  const example_scan_attrs_v1* at = (const example_scan_attrs_v1*)a->attrs;
  const float* x = (const float*)a->inputs[0]->data;
  float* y = (float*)a->outputs[0]->data;
  int32_t tokens = a->batch->num_tokens, width = at->width;
  float decay = at->decay;
  const int32_t* seq_index = env->seq_index;
  const int32_t* slots = env->state_slots;
  void* state = env->state;
  unsigned long long stride = env->state_stride;
  void* args[] = {&x, &y, &tokens, &width, &decay, &seq_index, &slots, &state, &stride};
  const size_t sizes[] = {sizeof x, sizeof y, sizeof tokens, sizeof width, sizeof decay, sizeof seq_index, sizeof slots,
                          sizeof state, sizeof stride};
  memra_launch_config c;
  memset(&c, 0, sizeof c);
  c.struct_size = MEMRA_LAUNCH_CONFIG_STRUCT_SIZE;
  c.grid[0] = (uint32_t)((width + EXAMPLE_SCAN_THREADS - 1) / EXAMPLE_SCAN_THREADS);
  c.grid[1] = c.grid[2] = 1;
  c.block[0] = EXAMPLE_SCAN_THREADS;
  c.block[1] = c.block[2] = 1;
  c.stream = env->stream;
  c.num_args = sizeof sizes / sizeof sizes[0];
  c.arg_sizes = sizes;
  return ctx->host->kernel_launch(ctx->host->ctx, rec->scan, &c, args);
}

/* memra-kernel-check's cases: sequences interleaved in the batch, widths that do and do
 * not fill a block. */
static memra_status scan_example(memra_plugin_ctx* ctx, int32_t index, memra_op_example* out) {
  static const struct {
    int32_t tokens, seqs, width;
    const char* label;
  } k_cases[] = {{5, 2, DIM, "5 rows of 2 sequences, width 8"},
                 {37, 3, 300, "37 rows of 3 sequences, width 300"},
                 {1, 1, 4096, "1 row, width 4096"}};
  if (out == NULL) return MEMRA_ERR_INVALID_ARGUMENT;
  if (index < 0 || index >= (int32_t)(sizeof k_cases / sizeof k_cases[0])) return MEMRA_ERR_NOT_FOUND;
  example_case* c = &ctx->cases;
  const int32_t n = k_cases[index].tokens, seqs = k_cases[index].seqs, w = k_cases[index].width;
  free(c->x);
  c->x = (float*)malloc(sizeof(float) * (size_t)n * (size_t)w);
  if (c->x == NULL) return fail(ctx, MEMRA_ERR_OUT_OF_MEMORY, "example: out of memory");
  uint32_t r = 12345u + (uint32_t)index;
  for (int64_t i = 0; i < (int64_t)n * w; ++i) {
    r = r * 1664525u + 1013904223u;
    c->x[i] = (float)(r >> 8) / 8388608.0f - 1.0f;
  }
  int32_t next[3] = {0, 0, 0};
  for (int32_t t = 0; t < n; ++t) {
    c->seq_index[t] = t % seqs;
    c->positions[t] = next[t % seqs]++;
  }
  c->attrs.struct_size = sizeof c->attrs;
  c->attrs.decay = index == 0 ? DECAY : 0.9f;
  c->attrs.width = w;
  c->in_shape[0] = c->out_shape[0] = n;
  c->in_shape[1] = c->out_shape[1] = w;
  c->inputs[0] = c->x;
  memset(out, 0, sizeof *out);
  out->struct_size = MEMRA_OP_EXAMPLE_STRUCT_SIZE;
  out->label = k_cases[index].label;
  out->attrs = &c->attrs;
  out->attrs_size = sizeof c->attrs;
  out->num_tokens = n;
  out->num_seqs = seqs;
  out->positions = c->positions;
  out->seq_index = c->seq_index;
  out->state_bytes = (uint64_t)w * sizeof(float);
  out->num_inputs = 1;
  out->input_shapes = c->in_shape;
  out->inputs = c->inputs;
  out->num_outputs = 1;
  out->output_shapes = c->out_shape;
  out->tolerance = 0.0f; /* bitwise */
  return MEMRA_OK;
}

static const memra_op_def k_ops[] = {{
    MEMRA_OP_DEF_STRUCT_SIZE, EXAMPLE_SCAN_OP, EXAMPLE_SCAN_V1, sizeof(example_scan_attrs_v1),
    MEMRA_OP_NEEDS_BATCH | MEMRA_OP_USES_STATE, "decayed running sum over a sequence, in RECURRENT state example.decay_scan.v1",
    scan_run_cpu, scan_prepare_cuda, scan_run_cuda, scan_example,
}};

/* ---- the plugin ---------------------------------------------------------------------- */

static void plugin_shutdown(memra_plugin_ctx* ctx) {
  while (ctx->records != NULL) {
    kernel_record* next = ctx->records->next;
    free(ctx->records);
    ctx->records = next;
  }
  free(ctx->cases.x);
  free(ctx);
}

static const memra_family_api k_family = {
    MEMRA_FAMILY_API_STRUCT_SIZE, config_normalize, tensor_name, plan_create, plan_describe, plan_info,
    plan_destroy,                 model_create,     model_forward, model_destroy,
};

static const char* const k_handles[] = {"ExampleRecurrentForCausalLM", NULL};

static const memra_plugin_descriptor k_desc = {
    MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE, MEMRA_ABI_MAJOR, MEMRA_ABI_MINOR, MEMRA_PLUGIN_KIND_FAMILY, "example",
    "0.1.0", "SDK example family: attention + its own op example.decay_scan (recurrent state)", k_handles, NULL,
};

MEMRA_EXPORT const memra_plugin_descriptor* memra_plugin_query(void) { return &k_desc; }

MEMRA_EXPORT memra_status memra_plugin_init(const memra_host_api* host, memra_plugin_api* out) {
  if (host == NULL || host->struct_size < MEMRA_HOST_API_STRUCT_SIZE || host->abi_major != MEMRA_ABI_MAJOR ||
      out == NULL || out->struct_size < MEMRA_PLUGIN_API_STRUCT_SIZE)
    return MEMRA_ERR_ABI_MISMATCH; /* a host older than SDK 2.7 cannot take the plugin's ops */
  memra_plugin_ctx* ctx = (memra_plugin_ctx*)calloc(1, sizeof *ctx);
  if (ctx == NULL) return MEMRA_ERR_OUT_OF_MEMORY;
  ctx->host = host;
  out->kind = MEMRA_PLUGIN_KIND_FAMILY;
  out->ctx = ctx;
  out->family = &k_family;
  out->shutdown = plugin_shutdown;
  out->num_ops = sizeof k_ops / sizeof k_ops[0];
  out->ops = k_ops;
  return MEMRA_OK;
}
