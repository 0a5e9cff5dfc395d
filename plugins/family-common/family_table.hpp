// The memra_family_api table of a built-in family plugin, written once: each slot's
// argument checks, the exception guard and the plugin's own pieces from a Traits type:
//
//   struct Traits {
//     using Plan = ...;    // built by plan_from_config, carries `info` (memra_plan_info)
//     using Model = ...;   // has `plan` and `ops`
//     static std::string normalize_config(const char* raw_json);
//     static std::optional<std::string> canonical_hf_name(std::string_view hf_name);
//     static std::optional<std::string> hf_tensor_parts(std::string_view hf_name);  // optional (tensor_parts, 2.11)
//     static std::optional<std::string> gguf_tensor_parts(std::string_view name);   // optional (tensor_parts, 2.11)
//     static bool gguf_names_are_canonical;  // GGUF tensor names pass through
//     static bool plan_from_config(const char* config_json, Plan&, std::string& error);
//     static void plan_bind_state(Plan&);   // re-points plan.info after a copy
//     static std::string plan_to_json(const Plan&);
//     static bool model_bind(Model&, const memra_weight_set&, std::string& error);
//     static memra_status model_run(Model&, const memra_forward_batch&, std::string& error);
//   };
//
// A family's plugin .cpp defines its Traits, its descriptor and memra_plugin_init.
#pragma once

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "family_plugin_support.hpp"

namespace memra::family {

template <class Traits>
struct FamilyTable {
  struct PlanBox {
    memra_plugin_ctx* ctx = nullptr;
    typename Traits::Plan plan;
  };
  struct ModelBox {
    memra_plugin_ctx* ctx = nullptr;
    typename Traits::Model model;
  };
  static PlanBox* plan_of(memra_model_plan* p) { return reinterpret_cast<PlanBox*>(p); }
  static const PlanBox* plan_of(const memra_model_plan* p) { return reinterpret_cast<const PlanBox*>(p); }
  static ModelBox* model_of(memra_model* m) { return reinterpret_cast<ModelBox*>(m); }

  static memra_status config_normalize(memra_plugin_ctx* ctx, const char* raw_json, char* buf, size_t buf_size, size_t* needed) {
    return guarded(ctx, [&] {
      if (!raw_json) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "config_normalize: NULL argument");
      return write_string(Traits::normalize_config(raw_json), buf, buf_size, needed);
    });
  }

  static memra_status tensor_name(memra_plugin_ctx* ctx, const char* format, const char* source_name, char* buf,
                                  size_t buf_size, size_t* needed) {
    return guarded(ctx, [&] {
      if (!format || !source_name) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "tensor_name: NULL argument");
      if (std::strcmp(format, "gguf") == 0 && Traits::gguf_names_are_canonical) return write_string(source_name, buf, buf_size, needed);
      if (std::strcmp(format, "hf") != 0) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, std::string("tensor_name: unknown format ") + format);
      const std::optional<std::string> name = Traits::canonical_hf_name(source_name);
      if (!name) return MEMRA_ERR_NOT_FOUND;
      return write_string(*name, buf, buf_size, needed);
    });
  }

  // ABI 2.11: the parts a checkpoint tensor is of canonical ones (stacked experts, fused ones
  // split), from Traits::hf_tensor_parts / gguf_tensor_parts when the family has them.
  static memra_status tensor_parts(memra_plugin_ctx* ctx, const char* format, const char* source_name, char* buf,
                                   size_t buf_size, size_t* needed) {
    return guarded(ctx, [&] {
      if (!format || !source_name || !needed) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "tensor_parts: NULL argument");
      if constexpr (requires { Traits::hf_tensor_parts(std::string_view()); }) {
        if (std::strcmp(format, "hf") == 0)
          if (const std::optional<std::string> parts = Traits::hf_tensor_parts(source_name)) return write_string(*parts, buf, buf_size, needed);
      }
      if constexpr (requires { Traits::gguf_tensor_parts(std::string_view()); }) {
        if (std::strcmp(format, "gguf") == 0)
          if (const std::optional<std::string> parts = Traits::gguf_tensor_parts(source_name)) return write_string(*parts, buf, buf_size, needed);
      }
      return MEMRA_ERR_NOT_FOUND;
    });
  }

  static memra_status plan_create(memra_plugin_ctx* ctx, const char* config_json, memra_model_plan** out) {
    return guarded(ctx, [&] {
      if (!config_json || !out) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "plan_create: NULL argument");
      auto* p = new PlanBox();
      p->ctx = ctx;
      std::string error;
      if (!Traits::plan_from_config(config_json, p->plan, error)) {
        delete p;
        return report(ctx, MEMRA_ERR_UNSUPPORTED, error);
      }
      *out = reinterpret_cast<memra_model_plan*>(p);
      return MEMRA_OK;
    });
  }

  static memra_status plan_describe(const memra_model_plan* plan, char* buf, size_t buf_size, size_t* needed) {
    memra_plugin_ctx* ctx = plan ? plan_of(plan)->ctx : nullptr;
    return guarded(ctx, [&] {
      if (!plan || !needed) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "plan_describe: NULL argument");
      return write_string(Traits::plan_to_json(plan_of(plan)->plan), buf, buf_size, needed);
    });
  }

  static memra_status plan_info(const memra_model_plan* plan, memra_plan_info* out) {
    memra_plugin_ctx* ctx = plan ? plan_of(plan)->ctx : nullptr;
    return guarded(ctx, [&] {
      if (!plan || !out) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "plan_info: NULL argument");
      const size_t size = std::min(out->struct_size, sizeof(memra_plan_info));
      if (size < MEMRA_PLAN_INFO_STRUCT_SIZE) return report(ctx, MEMRA_ERR_ABI_MISMATCH, "plan_info: the host's memra_plan_info is too old");
      memra_plan_info info = plan_of(plan)->plan.info;
      info.struct_size = size;
      std::memcpy(out, &info, size);
      return MEMRA_OK;
    });
  }

  static void plan_destroy(memra_model_plan* plan) { delete plan_of(plan); }

  static memra_status model_create(const memra_model_plan* plan, const memra_weight_set* weights, const memra_backend_ops* ops,
                                   memra_model** out) {
    memra_plugin_ctx* ctx = plan ? plan_of(plan)->ctx : nullptr;
    return guarded(ctx, [&] {
      if (!plan || !weights || !ops || !out) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "model_create: NULL argument");
      if (!MEMRA_STRUCT_HAS(ops, memra_backend_ops, logits_output))
        return report(ctx, MEMRA_ERR_ABI_MISMATCH, "model_create: the host's backend op table is too old");
      auto* m = new ModelBox();
      m->ctx = ctx;
      m->model.plan = plan_of(plan)->plan;
      Traits::plan_bind_state(m->model.plan);
      m->model.ops = ops;
      std::string error;
      if (!Traits::model_bind(m->model, *weights, error)) {
        delete m;
        return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, error);
      }
      *out = reinterpret_cast<memra_model*>(m);
      return MEMRA_OK;
    });
  }

  static memra_status model_forward(memra_model* model, const memra_forward_batch* batch) {
    memra_plugin_ctx* ctx = model ? model_of(model)->ctx : nullptr;
    return guarded(ctx, [&] {
      if (!model || !batch) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "model_forward: NULL argument");
      std::string error;
      const memra_status st = Traits::model_run(model_of(model)->model, *batch, error);
      return st == MEMRA_OK ? st : report(ctx, st, error);
    });
  }

  static void model_destroy(memra_model* model) { delete model_of(model); }

  static constexpr memra_family_api table() {
    return {MEMRA_FAMILY_API_STRUCT_SIZE, config_normalize, tensor_name, plan_create, plan_describe, plan_info,
            plan_destroy, model_create, model_forward, model_destroy, tensor_parts};
  }
};

// A CPU or CUDA device: score 10; others cannot run a built-in family.
inline int32_t cpu_or_cuda_score(const memra_device_info* device, const char*) {
  if (!device) return -1;
  return device->backend == MEMRA_BACKEND_CPU || device->backend == MEMRA_BACKEND_CUDA ? 10 : -1;
}

}  // namespace memra::family
