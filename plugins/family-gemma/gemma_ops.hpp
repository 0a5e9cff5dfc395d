// The op only this family needs, brought to the host as a plugin op (memra/ops.h
// memra_op_def, SDK 2.7): its attribute struct, contract and CPU reference (gemma_ops.cpp),
// and its CUDA form (gemma_cuda.cpp, gemma_kernels.cu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "memra/ops.h"

namespace memra::gemma {

// gemma.softcap v1: outputs[0] = cap * tanh(inputs[0] / cap) elementwise, float32
// (gemma_math.h), over any shape; the output may alias the input. No batch, no state. The
// forward pass runs it on the final logits when the config has final_logit_softcapping
// (Gemma 2/3/4's tanh soft-cap; attention's soft-cap is memra_attention_params.logit_softcap).
#define GEMMA_OP_SOFTCAP "gemma.softcap"
struct SoftcapAttrsV1 {
  size_t struct_size;
  float cap;  // > 0
};

// The definitions memra_plugin_init hands the host.
std::span<const memra_op_def> op_defs();

// Shared by the CPU reference and the CUDA form: the argument checks.
memra_status softcap_check(memra_plugin_ctx* ctx, const memra_op_args* args);
memra_status prepare_cuda(memra_plugin_ctx* ctx, const memra_device_info* device, void** kernel_data);
memra_status softcap_cuda(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args);

}  // namespace memra::gemma
