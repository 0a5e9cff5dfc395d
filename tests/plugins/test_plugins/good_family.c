/* A good family test plugin in C (C keeps the library unloadable, which the
 * lifetime test checks with dlopen(RTLD_NOLOAD)).
 *
 * - init reads config "good.greeting" through config_get (probing the size first)
 *   and logs "greeting: <value>";
 * - config_normalize answers {"normalised_from": <the raw document's bytes>}; tensor_name
 *   prefixes "good." and says NOT_FOUND for names starting with "skip";
 * - plan_create fails with UNSUPPORTED and a message when the config contains
 *   "unsupported"; the plan describes itself as {"plugin":"good-family","config_bytes":N};
 *   plan_info: vocab 4, 2 layers, token ids, one PAGED_KV group (2 KV heads of 8);
 * - model_create takes its state from host memory_alloc; model_forward writes
 *   logits[i][j] = token_ids[logits_rows[i]] * 10 + j for a vocab of 4;
 * - shutdown logs "shutdown".
 */
#include <memra/memra.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB 4

struct memra_plugin_ctx {
  const memra_host_api* host;
};

struct memra_model_plan {
  memra_plugin_ctx* ctx;
  size_t config_bytes;
  int32_t layers[2];
  memra_state_group group;
};

struct memra_model {
  memra_plugin_ctx* ctx;
  memra_buffer state; /* from host memory_alloc */
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
  if (raw_json == NULL || needed == NULL) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "config_normalize: NULL argument");
  char text[64];
  snprintf(text, sizeof text, "{\"normalised_from\":%zu}", strlen(raw_json));
  return copy_out(text, buf, buf_size, needed);
}

static memra_status tensor_name(memra_plugin_ctx* ctx, const char* format, const char* source_name, char* buf,
                                size_t buf_size, size_t* needed) {
  if (format == NULL || source_name == NULL) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "tensor_name: NULL argument");
  if (strncmp(source_name, "skip", 4) == 0) return MEMRA_ERR_NOT_FOUND;
  char text[256];
  snprintf(text, sizeof text, "good.%s", source_name);
  return copy_out(text, buf, buf_size, needed);
}

static memra_status plan_create(memra_plugin_ctx* ctx, const char* config_json, memra_model_plan** out) {
  if (config_json == NULL || out == NULL) return fail(ctx, MEMRA_ERR_INVALID_ARGUMENT, "plan_create: NULL argument");
  if (strstr(config_json, "unsupported") != NULL) {
    return fail(ctx, MEMRA_ERR_UNSUPPORTED, "good-family: architecture 'Unsupported' is not supported; expected GoodForCausalLM");
  }
  memra_model_plan* plan = (memra_model_plan*)calloc(1, sizeof *plan);
  if (plan == NULL) return fail(ctx, MEMRA_ERR_OUT_OF_MEMORY, "plan_create: out of memory");
  plan->ctx = ctx;
  plan->config_bytes = strlen(config_json);
  plan->layers[0] = 0;
  plan->layers[1] = 1;
  plan->group.struct_size = MEMRA_STATE_GROUP_STRUCT_SIZE;
  plan->group.kind = MEMRA_STATE_PAGED_KV;
  plan->group.num_layers = 2;
  plan->group.layers = plan->layers;
  plan->group.kv_heads = 2;
  plan->group.head_dim = 8;
  *out = plan;
  return MEMRA_OK;
}

static memra_status plan_info(const memra_model_plan* plan, memra_plan_info* out) {
  if (out == NULL || out->struct_size < MEMRA_PLAN_INFO_STRUCT_SIZE) return MEMRA_ERR_ABI_MISMATCH;
  out->vocab_size = VOCAB;
  out->num_layers = 2;
  out->inputs = MEMRA_INPUT_TOKEN_IDS;
  out->num_state_groups = 1;
  out->state_groups = &plan->group;
  out->num_encoders = 0;
  out->encoders = NULL;
  return MEMRA_OK;
}

static memra_status plan_describe(const memra_model_plan* plan, char* buf, size_t buf_size, size_t* needed) {
  char text[128];
  int n = snprintf(text, sizeof text, "{\"plugin\":\"good-family\",\"config_bytes\":%zu}", plan->config_bytes);
  *needed = (size_t)n + 1;
  if (buf == NULL || buf_size < *needed) return MEMRA_ERR_INVALID_ARGUMENT;
  memcpy(buf, text, *needed);
  return MEMRA_OK;
}

static void plan_destroy(memra_model_plan* plan) { free(plan); }

static memra_status model_create(const memra_model_plan* plan, const memra_weight_set* weights,
                                 const memra_backend_ops* ops, memra_model** out) {
  (void)weights;
  (void)ops;
  memra_plugin_ctx* ctx = plan->ctx;
  memra_model* model = (memra_model*)calloc(1, sizeof *model);
  if (model == NULL) return fail(ctx, MEMRA_ERR_OUT_OF_MEMORY, "model_create: out of memory");
  model->ctx = ctx;
  model->state.struct_size = MEMRA_BUFFER_STRUCT_SIZE;
  const memra_host_api* host = ctx->host;
  memra_status s = host->memory_alloc(host->ctx, MEMRA_MEMORY_HOST, 256, 128, &model->state);
  if (s != MEMRA_OK) {
    free(model);
    return fail(ctx, s, "model_create: memory_alloc failed");
  }
  if (((uintptr_t)model->state.ptr % 128u) != 0) {
    host->memory_free(host->ctx, &model->state);
    free(model);
    return fail(ctx, MEMRA_ERR_INTERNAL, "model_create: memory_alloc ignored the alignment");
  }
  memset(model->state.ptr, 0, 256);
  *out = model;
  return MEMRA_OK;
}

static memra_status model_forward(memra_model* model, const memra_forward_batch* b) {
  if (b == NULL || b->struct_size < MEMRA_FORWARD_BATCH_STRUCT_SIZE) {
    return fail(model->ctx, MEMRA_ERR_INVALID_ARGUMENT, "model_forward: batch struct_size too small");
  }
  for (int32_t i = 0; i < b->num_logits; ++i) {
    int32_t row = b->logits_rows[i];
    if (row < 0 || row >= b->num_tokens) return fail(model->ctx, MEMRA_ERR_INVALID_ARGUMENT, "model_forward: logits row out of range");
    for (int j = 0; j < VOCAB; ++j) b->logits[i * VOCAB + j] = (float)(b->token_ids[row] * 10 + j);
  }
  ((int64_t*)model->state.ptr)[0] += 1; /* steps run, proves the host buffer is writable */
  return MEMRA_OK;
}

static void model_destroy(memra_model* model) {
  model->ctx->host->memory_free(model->ctx->host->ctx, &model->state);
  free(model);
}

static void plugin_shutdown(memra_plugin_ctx* ctx) {
  ctx->host->log(ctx->host->ctx, MEMRA_LOG_INFO, "shutdown");
  free(ctx);
}

static const memra_family_api k_family = {
    MEMRA_FAMILY_API_STRUCT_SIZE, config_normalize, tensor_name, plan_create, plan_describe, plan_info,
    plan_destroy,                 model_create,     model_forward, model_destroy,
};

#ifndef FAMILY_NAME
#define FAMILY_NAME "good-family"
#define FAMILY_HANDLE "GoodForCausalLM"
#endif
static const char* const k_handles[] = {FAMILY_HANDLE, NULL};

#ifdef OP_ATTRS_SIZE /* a family that brings one op (OP_NAME), for the loader's op checks */
static memra_status op_run(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args) {
  (void)ctx, (void)env, (void)args;
  return MEMRA_OK;
}
static const memra_op_def k_ops[] = {{MEMRA_OP_DEF_STRUCT_SIZE, OP_NAME, 1u, OP_ATTRS_SIZE, 0u, "a test op", op_run, NULL, NULL, NULL}};
#endif

static const memra_plugin_descriptor k_desc = {
    MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE, MEMRA_ABI_MAJOR, MEMRA_ABI_MINOR, MEMRA_PLUGIN_KIND_FAMILY, FAMILY_NAME,
    "0.2.0", "test family plugin", k_handles, NULL, /* score NULL -> 0 */
};

MEMRA_EXPORT const memra_plugin_descriptor* memra_plugin_query(void) { return &k_desc; }

MEMRA_EXPORT memra_status memra_plugin_init(const memra_host_api* host, memra_plugin_api* out) {
  memra_plugin_ctx* ctx = (memra_plugin_ctx*)malloc(sizeof *ctx);
  if (ctx == NULL) return MEMRA_ERR_OUT_OF_MEMORY;
  ctx->host = host;
  size_t needed = 0;
  char small[2];
  memra_status s = host->config_get(host->ctx, "good.greeting", small, sizeof small, &needed);
  if (s == MEMRA_ERR_INVALID_ARGUMENT && needed > sizeof small) {
    char* value = (char*)malloc(needed);
    if (value == NULL) {
      free(ctx);
      return MEMRA_ERR_OUT_OF_MEMORY;
    }
    s = host->config_get(host->ctx, "good.greeting", value, needed, &needed);
    if (s == MEMRA_OK) {
      char line[256];
      snprintf(line, sizeof line, "greeting: %s", value);
      host->log(host->ctx, MEMRA_LOG_INFO, line);
    }
    free(value);
  }
  out->kind = MEMRA_PLUGIN_KIND_FAMILY;
  out->ctx = ctx;
  out->family = &k_family;
  out->shutdown = plugin_shutdown;
#ifdef OP_ATTRS_SIZE
  out->num_ops = 1;
  out->ops = k_ops;
#endif
  return MEMRA_OK;
}
