// family-llama plugin entry points: descriptor, init, and the family table.
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "llama_forward.hpp"
#include "llama_plan.hpp"
#include "memra/memra.h"

struct memra_model_plan {
  memra::llama::Plan plan;
};
struct memra_model {
  memra::llama::Model model;
};

namespace {

const memra_host_api* g_host = nullptr;

memra_status report(memra_status code, const std::string& message) {
  if (g_host && g_host->error_report) return g_host->error_report(g_host->ctx, code, message.c_str());
  return code;
}

// Every exported body runs inside this: no exception crosses the C boundary.
template <class F>
memra_status guarded(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return report(MEMRA_ERR_OUT_OF_MEMORY, "family-llama: out of memory");
  } catch (const std::exception& e) {
    return report(MEMRA_ERR_INTERNAL, std::string("family-llama: ") + e.what());
  } catch (...) {
    return report(MEMRA_ERR_INTERNAL, "family-llama: unknown exception");
  }
}

memra_status plan_create(const char* config_json, memra_model_plan** out) {
  return guarded([&] {
    if (!config_json || !out) return report(MEMRA_ERR_INVALID_ARGUMENT, "plan_create: NULL argument");
    auto* p = new memra_model_plan();
    std::string error;
    if (!memra::llama::plan_from_config(config_json, p->plan, error)) {
      delete p;
      return report(MEMRA_ERR_UNSUPPORTED, error);
    }
    *out = p;
    return MEMRA_OK;
  });
}

memra_status plan_describe(const memra_model_plan* plan, char* buf, size_t buf_size, size_t* needed) {
  return guarded([&] {
    if (!plan || !needed) return report(MEMRA_ERR_INVALID_ARGUMENT, "plan_describe: NULL argument");
    const std::string j = memra::llama::plan_to_json(plan->plan);
    *needed = j.size() + 1;
    if (!buf || buf_size < j.size() + 1) return MEMRA_ERR_INVALID_ARGUMENT;
    std::memcpy(buf, j.c_str(), j.size() + 1);
    return MEMRA_OK;
  });
}

void plan_destroy(memra_model_plan* plan) { delete plan; }

memra_status model_create(const memra_model_plan* plan, const memra_weight_set* weights,
                          const memra_backend_ops* ops, memra_model** out) {
  return guarded([&] {
    if (!plan || !weights || !ops || !out) return report(MEMRA_ERR_INVALID_ARGUMENT, "model_create: NULL argument");
    if (!MEMRA_STRUCT_HAS(ops, memra_backend_ops, logits_output))
      return report(MEMRA_ERR_ABI_MISMATCH, "model_create: the host's backend op table is too old");
    auto* m = new memra_model();
    m->model.plan = plan->plan;
    m->model.ops = ops;
    std::string error;
    if (!memra::llama::model_bind(m->model, *weights, error)) {
      delete m;
      return report(MEMRA_ERR_INVALID_ARGUMENT, error);
    }
    *out = m;
    return MEMRA_OK;
  });
}

memra_status model_forward(memra_model* model, const memra_forward_batch* batch) {
  return guarded([&] {
    if (!model || !batch) return report(MEMRA_ERR_INVALID_ARGUMENT, "model_forward: NULL argument");
    std::string error;
    const memra_status st = memra::llama::model_run(model->model, *batch, error);
    return st == MEMRA_OK ? st : report(st, error);
  });
}

void model_destroy(memra_model* model) { delete model; }

int32_t score(const memra_device_info* device, const char* handled_name) {
  (void)handled_name;
  if (!device) return -1;
  return device->backend == MEMRA_BACKEND_CPU || device->backend == MEMRA_BACKEND_CUDA ? 10 : -1;
}

const char* const kHandles[] = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                                nullptr};

const memra_plugin_descriptor kDescriptor = {
    MEMRA_PLUGIN_DESCRIPTOR_STRUCT_SIZE,
    MEMRA_ABI_MAJOR,
    MEMRA_ABI_MINOR,
    MEMRA_PLUGIN_KIND_FAMILY,
    "llama",
    "0.1.0",
    "Llama 2/3.x, Mistral, Qwen2/2.5 and Qwen3 dense decoder-only transformers",
    kHandles,
    score,
};

const memra_family_api kFamily = {
    MEMRA_FAMILY_API_STRUCT_SIZE, plan_create, plan_describe, plan_destroy, model_create, model_forward, model_destroy,
};

}  // namespace

MEMRA_EXPORT const memra_plugin_descriptor* memra_plugin_query(void) { return &kDescriptor; }

MEMRA_EXPORT memra_status memra_plugin_init(const memra_host_api* host, memra_plugin_api* out) {
  if (!host || !out) return MEMRA_ERR_INVALID_ARGUMENT;
  g_host = host;
  if (!MEMRA_STRUCT_HAS(out, memra_plugin_api, family))
    return report(MEMRA_ERR_ABI_MISMATCH, "family-llama: host plugin table too small");
  out->kind = MEMRA_PLUGIN_KIND_FAMILY;
  out->family = &kFamily;
  return MEMRA_OK;
}
