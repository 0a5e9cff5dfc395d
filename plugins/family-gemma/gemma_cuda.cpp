// The CUDA form of the family's op (memra_op_def.prepare_cuda / run_cuda): the kernel of
// gemma_kernels.fatbin (beside the plugin), loaded once per GPU backend and launched through
// the host's kernel services with argument sizes (so a decode step stays one CUDA graph).
#include <memory>
#include <string>

#include "family_plugin_support.hpp"
#include "gemma_ops.hpp"

namespace memra::gemma {
namespace {

using family::guarded;
using family::report;

struct Kernels {
  memra_kernel* softcap = nullptr;
};

}  // namespace

memra_status prepare_cuda(memra_plugin_ctx* ctx, const memra_device_info* device, void** kernel_data) {
  return guarded(ctx, [&]() -> memra_status {
    if (!device || !kernel_data) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "prepare_cuda: NULL argument");
    const std::string arch = device->arch ? device->arch : "";
    if (arch != "sm_90a" && arch != "sm_120a")
      return report(ctx, MEMRA_ERR_UNSUPPORTED, "gemma_kernels.fatbin has no SASS for " + (arch.empty() ? std::string("this GPU") : arch));
    const memra_host_api* h = ctx->host;
    if (!h->kernel_module_load || !h->kernel_get) return report(ctx, MEMRA_ERR_UNSUPPORTED, "the host has no kernel services");
    memra_kernel_module* module = nullptr;
    if (const memra_status st = h->kernel_module_load(h->ctx, "gemma_kernels", &module); st != MEMRA_OK) return st;
    auto k = std::make_shared<Kernels>();
    if (const memra_status st = h->kernel_get(h->ctx, module, "gemma_softcap", &k->softcap); st != MEMRA_OK) return st;
    *kernel_data = k.get();
    std::lock_guard lock(ctx->mu);
    ctx->owned.push_back(std::move(k));
    return MEMRA_OK;
  });
}

memra_status softcap_cuda(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args) {
  return guarded(ctx, [&]() -> memra_status {
    if (const memra_status st = softcap_check(ctx, args); st != MEMRA_OK) return st;
    const auto* k = static_cast<const Kernels*>(env->kernel_data);
    if (!k || !k->softcap) return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "gemma.softcap: not prepared on this backend");
    long long n = 1;
    for (int32_t i = 0; i < args->inputs[0]->ndim; ++i) n *= args->inputs[0]->shape[i];
    const float* x = static_cast<const float*>(args->inputs[0]->data);
    float* y = static_cast<float*>(args->outputs[0]->data);
    float cap = static_cast<const SoftcapAttrsV1*>(args->attrs)->cap;
    void* a[] = {&x, &n, &cap, &y};
    const size_t sizes[] = {sizeof x, sizeof n, sizeof cap, sizeof y};
    memra_launch_config c{};
    c.struct_size = MEMRA_LAUNCH_CONFIG_STRUCT_SIZE;
    c.grid[0] = static_cast<uint32_t>((n + 255) / 256), c.grid[1] = 1, c.grid[2] = 1;
    c.block[0] = 256, c.block[1] = 1, c.block[2] = 1;
    c.stream = env->stream;
    c.num_args = 4;
    c.arg_sizes = sizes;
    return ctx->host->kernel_launch(ctx->host->ctx, k->softcap, &c, a);
  });
}

}  // namespace memra::gemma
