/* A hybrid test family with RECURRENT state (until a real hybrid family lands): layer 0
 * is attention over the paged KV cache, layer 1 a decay_scan (memra/ops.h) whose state
 * is a decayed running sum, so logits depend on the whole history through the state:
 *
 *   x  = token_embd[token]                         [tokens][DIM]
 *   x1 = x + attention(layer 0; q,k,v = x·Wq, x·Wk, x·Wv; 1 head of DIM, no RoPE)
 *   x2 = x1 + decay_scan(layer 1; decay DECAY; x1)  (state: float32[DIM] per sequence)
 *   logits = x2[logit rows] · output.weightᵀ        [rows][VOCAB]
 *
 * Weights (f32): token_embd.weight [VOCAB][DIM], blk.0.attn_{q,k,v}.weight [DIM][DIM],
 * output.weight [VOCAB][DIM]. Config words turn on the refusals the engine must make:
 * "bad_state_kind" (group kind 99), "bad_op" (requires no_such_op), "bad_op_version"
 * (decay_scan v7). */
#include <memra/memra.h>

#include <stdlib.h>
#include <string.h>

#define VOCAB 16
#define DIM 8
#define DECAY 0.75f

struct memra_plugin_ctx {
  const memra_host_api* host;
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
  rec->layout = MEMRA_STATE_LAYOUT_DECAY_SCAN_V1;
  p->op.struct_size = MEMRA_OP_REQUIREMENT_STRUCT_SIZE;
  p->op.name = strstr(config_json, "bad_op\"") ? "no_such_op" : MEMRA_OP_DECAY_SCAN;
  p->op.version = strstr(config_json, "bad_op_version") ? 7u : MEMRA_OP_DECAY_SCAN_V1;
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
  return copy_out("{\"plugin\":\"recurrent-test\",\"layers\":[\"attention\",\"decay_scan\"]}", buf, buf_size, needed);
}

static void plan_destroy(memra_model_plan* plan) { free(plan); }

static memra_status model_create(const memra_model_plan* plan, const memra_weight_set* weights,
                                 const memra_backend_ops* ops, memra_model** out) {
  memra_plugin_ctx* ctx = plan->ctx;
  if (!MEMRA_STRUCT_HAS(ops, memra_backend_ops, op_run))
    return fail(ctx, MEMRA_ERR_UNSUPPORTED, "recurrent-test: the backend has no ops by name (ABI 2.1)");
  memra_model* m = (memra_model*)calloc(1, sizeof *m);
  if (m == NULL) return fail(ctx, MEMRA_ERR_OUT_OF_MEMORY, "model_create: out of memory");
  m->ctx = ctx;
  m->ops = ops;
  for (int i = 0; i < W_COUNT; ++i) {
    for (size_t j = 0; j < weights->count; ++j)
      if (strcmp(weights->weights[j].name, k_weight_names[i]) == 0) m->w[i] = &weights->weights[j];
    if (m->w[i] == NULL) {
      free(m);
      return fail(ctx, MEMRA_ERR_NOT_FOUND, "recurrent-test: a weight is missing");
    }
  }
  memra_status s = ops->op_find(ops->ctx, MEMRA_OP_DECAY_SCAN, MEMRA_OP_DECAY_SCAN_V1, &m->scan);
  if (s != MEMRA_OK) {
    free(m);
    return fail(ctx, s, "recurrent-test: the backend has no decay_scan v1");
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
  if (first < 0 || first >= last || last > 2) return fail(m->ctx, MEMRA_ERR_INVALID_ARGUMENT, "recurrent-test: bad layer range");
  if (first == 1) {
    if (b->num_carry_in != 1 || b->carry_in == NULL) return fail(m->ctx, MEMRA_ERR_INVALID_ARGUMENT, "recurrent-test: no carry");
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
    if (b->carry_out == NULL || b->num_carry_out == NULL) return fail(m->ctx, MEMRA_ERR_INVALID_ARGUMENT, "recurrent-test: no carry out");
    b->carry_out[0] = x1;
    *b->num_carry_out = 1;
    return MEMRA_OK;
  }
layer1:;
  const memra_decay_scan_attrs_v1 attrs = {MEMRA_DECAY_SCAN_ATTRS_V1_STRUCT_SIZE, DECAY, DIM};
  const memra_tensor* ins[1] = {&x1};
  memra_tensor* outs[1] = {&h};
  memra_op_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = MEMRA_OP_ARGS_STRUCT_SIZE;
  args.layer = 1;
  args.attrs_version = MEMRA_OP_DECAY_SCAN_V1;
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

static void plugin_shutdown(memra_plugin_ctx* ctx) { free(ctx); }

static const memra_family_api k_family = {
    MEMRA_FAMILY_API_STRUCT_SIZE, config_normalize, tensor_name, plan_create, plan_describe, plan_info,
    plan_destroy,                 model_create,     model_forward, model_destroy,
};

static const char* const k_handles[] = {"RecurrentTestForCausalLM", NULL};

static const memra_plugin_descriptor k_desc = {
    MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE, MEMRA_ABI_MAJOR, MEMRA_ABI_MINOR, MEMRA_PLUGIN_KIND_FAMILY, "recurrent-test",
    "0.1.0", "test family: attention + decay_scan recurrent state", k_handles, NULL,
};

MEMRA_EXPORT const memra_plugin_descriptor* memra_plugin_query(void) { return &k_desc; }

MEMRA_EXPORT memra_status memra_plugin_init(const memra_host_api* host, memra_plugin_api* out) {
  memra_plugin_ctx* ctx = (memra_plugin_ctx*)malloc(sizeof *ctx);
  if (ctx == NULL) return MEMRA_ERR_OUT_OF_MEMORY;
  ctx->host = host;
  out->kind = MEMRA_PLUGIN_KIND_FAMILY;
  out->ctx = ctx;
  out->family = &k_family;
  out->shutdown = plugin_shutdown;
  return MEMRA_OK;
}
