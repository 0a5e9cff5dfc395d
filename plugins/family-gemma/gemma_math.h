/* family-gemma's elementwise arithmetic, shared by the CPU reference (gemma_ops.cpp) and the
 * CUDA kernel (gemma_kernels.cu) so both compute the same expression. */
#ifndef MEMRA_GEMMA_MATH_H
#define MEMRA_GEMMA_MATH_H

#ifdef __CUDACC__
#define GEMMA_HD __host__ __device__ inline
#else
#define GEMMA_HD inline
#include <cmath>
#endif

/* gemma.softcap: cap * tanh(x / cap), float32 (transformers: logits / cap, tanh, * cap).
 * tanh is the platform's (std::tanh / tanhf), which may differ by an ulp between them:
 * the op's kernel-check cases carry a tolerance of 2e-6 relative. */
GEMMA_HD float gemma_softcap(float x, float cap) {
#ifdef __CUDACC__
  return cap * tanhf(x / cap);
#else
  return cap * std::tanh(x / cap);
#endif
}

#endif /* MEMRA_GEMMA_MATH_H */
