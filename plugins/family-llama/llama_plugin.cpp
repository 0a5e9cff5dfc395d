// family-llama plugin entry points: descriptor, init, and the family table.
#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "llama_forward.hpp"
#include "family_plugin_support.hpp"
#include "llama_config.hpp"
#include "llama_plan.hpp"
#include "memra/memra.h"

struct memra_model_plan {
  memra_plugin_ctx* ctx = nullptr;
  memra::llama::Plan plan;
};
struct memra_model {
  memra_plugin_ctx* ctx = nullptr;
  memra::llama::Model model;
};

namespace {

using memra::family::guarded;
using memra::family::report;

memra_status config_normalize(memra_plugin_ctx* ctx, const char* raw_json, char* buf, size_t buf_size, size_t* needed) {
  return guarded(ctx, [&] {
    return memra::family::write_string(memra::llama::normalize_config(raw_json), buf, buf_size, needed);
  });
}

memra_status tensor_name(memra_plugin_ctx* ctx, const char* format, const char* source_name, char* buf, size_t buf_size,
                         size_t* needed) {
  return guarded(ctx, [&] {
    if (!format || !source_name) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "tensor_name: NULL argument");
    if (std::strcmp(format, "gguf") == 0) return memra::family::write_string(source_name, buf, buf_size, needed);
    if (std::strcmp(format, "hf") != 0) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, std::string("tensor_name: unknown format ") + format);
    const auto name = memra::llama::canonical_hf_name(source_name);
    if (!name) return MEMRA_ERR_NOT_FOUND;
    return memra::family::write_string(*name, buf, buf_size, needed);
  });
}

memra_status plan_create(memra_plugin_ctx* ctx, const char* config_json, memra_model_plan** out) {
  return guarded(ctx, [&] {
    if (!config_json || !out) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "plan_create: NULL argument");
    auto* p = new memra_model_plan();
    p->ctx = ctx;
    std::string error;
    if (!memra::llama::plan_from_config(config_json, p->plan, error)) {
      delete p;
      return report(ctx, MEMRA_ERR_UNSUPPORTED, error);
    }
    *out = p;
    return MEMRA_OK;
  });
}

memra_status plan_describe(const memra_model_plan* plan, char* buf, size_t buf_size, size_t* needed) {
  memra_plugin_ctx* ctx = plan ? plan->ctx : nullptr;
  return guarded(ctx, [&] {
    if (!plan || !needed) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "plan_describe: NULL argument");
    return memra::family::write_string(memra::llama::plan_to_json(plan->plan), buf, buf_size, needed);
  });
}

memra_status plan_info(const memra_model_plan* plan, memra_plan_info* out) {
  memra_plugin_ctx* ctx = plan ? plan->ctx : nullptr;
  return guarded(ctx, [&] {
    if (!plan || !out) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "plan_info: NULL argument");
    const size_t size = std::min(out->struct_size, sizeof(memra_plan_info));
    if (size < MEMRA_PLAN_INFO_STRUCT_SIZE) return report(ctx, MEMRA_ERR_ABI_MISMATCH, "plan_info: the host's memra_plan_info is too old");
    memra_plan_info info = plan->plan.info;
    info.struct_size = size;
    std::memcpy(out, &info, size);
    return MEMRA_OK;
  });
}

void plan_destroy(memra_model_plan* plan) { delete plan; }

memra_status model_create(const memra_model_plan* plan, const memra_weight_set* weights,
                          const memra_backend_ops* ops, memra_model** out) {
  memra_plugin_ctx* ctx = plan ? plan->ctx : nullptr;
  return guarded(ctx, [&] {
    if (!plan || !weights || !ops || !out) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "model_create: NULL argument");
    if (!MEMRA_STRUCT_HAS(ops, memra_backend_ops, logits_output))
      return report(ctx, MEMRA_ERR_ABI_MISMATCH, "model_create: the host's backend op table is too old");
    auto* m = new memra_model();
    m->ctx = ctx;
    m->model.plan = plan->plan;
    m->model.ops = ops;
    std::string error;
    if (!memra::llama::model_bind(m->model, *weights, error)) {
      delete m;
      return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, error);
    }
    *out = m;
    return MEMRA_OK;
  });
}

memra_status model_forward(memra_model* model, const memra_forward_batch* batch) {
  memra_plugin_ctx* ctx = model ? model->ctx : nullptr;
  return guarded(ctx, [&] {
    if (!model || !batch) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "model_forward: NULL argument");
    std::string error;
    const memra_status st = memra::llama::model_run(model->model, *batch, error);
    return st == MEMRA_OK ? st : report(ctx, st, error);
  });
}

void model_destroy(memra_model* model) { delete model; }

int32_t score(const memra_device_info* device, const char* handled_name) {
  (void)handled_name;
  if (!device) return -1;
  return device->backend == MEMRA_BACKEND_CPU || device->backend == MEMRA_BACKEND_CUDA ? 10 : -1;
}

const memra_plugin_descriptor kDescriptor = {
    MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE,
    MEMRA_ABI_MAJOR,
    MEMRA_ABI_MINOR,
    MEMRA_PLUGIN_KIND_FAMILY,
    "llama",
    "0.2.0",
    "Llama 2/3.x, Mistral, Qwen2/2.5, Qwen3 and Qwen3-MoE decoder-only transformers",
    memra::llama::handled_architectures(),
    score,
};

const memra_family_api kFamily = {
    MEMRA_FAMILY_API_STRUCT_SIZE, config_normalize, tensor_name, plan_create, plan_describe, plan_info,
    plan_destroy, model_create, model_forward, model_destroy,
};

}  // namespace

MEMRA_EXPORT const memra_plugin_descriptor* memra_plugin_query(void) { return &kDescriptor; }

MEMRA_EXPORT memra_status memra_plugin_init(const memra_host_api* host, memra_plugin_api* out) {
  return memra::family::init_context(host, out, "family-llama", &kFamily);
}
