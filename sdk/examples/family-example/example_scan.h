/* example.decay_scan — the arithmetic shared by the plugin's CPU reference (C) and its
 * CUDA kernel (example_scan.cu), so the two cannot drift apart.
 *
 * For each token row t, in batch order, with s the state of the row's sequence (its
 * slot of the layer's RECURRENT state, width float32):
 *     s = decay * s + x[t];  y[t] = s
 * one rounding per operation (the C side is built with -ffp-contract=off, the kernel
 * uses __fmul_rn / __fadd_rn), so the two agree bit for bit. A sequence's rows are in
 * position order, so a chunked prefill gives bitwise what one step gives. */
#ifndef MEMRA_EXAMPLE_SCAN_H
#define MEMRA_EXAMPLE_SCAN_H

#include <stdint.h>

#define EXAMPLE_SCAN_OP "example.decay_scan"
#define EXAMPLE_SCAN_V1 1u
#define EXAMPLE_SCAN_LAYOUT "example.decay_scan.v1" /* float32[width] per sequence */
#define EXAMPLE_SCAN_MODULE "example_scan"           /* example_scan.fatbin, beside the plugin's .so */
#define EXAMPLE_SCAN_KERNEL "example_decay_scan"
#define EXAMPLE_SCAN_THREADS 128

typedef struct example_scan_attrs_v1 {
  size_t struct_size;
  float decay;
  int32_t width;
} example_scan_attrs_v1;

#endif
