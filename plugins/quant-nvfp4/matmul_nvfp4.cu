// quant-nvfp4's kernel module (matmul_nvfp4.fatbin beside the plugin), for every GPU: the
// f32-row GEMV decoding e2m1 codes and e4m3 scales in software (kernels/matmul/gemv.cuh over
// SchemeNVFP4 units), the prompt GEMM's dequantiser and the embedding gather.
#include "kernels/matmul/gemv.cuh"
#include "plugins/quant-nvfp4/nvfp4_units.cuh"

MEMRA_DEFINE_GEMV(nvfp4, memra::cuda::SchemeNVFP4)

#include "plugins/quant-nvfp4/nvfp4_entries.cuh"
