/* example_i8 — the layout and arithmetic shared by the plugin's CPU code (C) and its
 * CUDA kernel (example_i8.cu), so the two cannot drift apart.
 *
 * A [rows][cols] matrix is `rows` records of EXAMPLE_I8_ROW_BYTES(cols) bytes: an f32
 * scale, then cols int8 codes; w[r][c] = code * scale, scale = max|w[r]| / 127.
 * cols must be a multiple of 4 so every record (and its scale) stays 4-byte aligned.
 *
 * y[t][r] = scale_r * S, where S sums code[c] * x[t][c] like one 32-lane warp: lane l
 * adds c = l, l+32, ... in order (f32, product then sum, no fused multiply-add), then
 * the lanes are folded as __shfl_down_sync does (offsets 16, 8, 4, 2, 1). The CPU
 * reference and the kernel do exactly these f32 operations, so they agree bit for bit,
 * and a token's row never depends on the batch (batch invariance). */
#ifndef MEMRA_EXAMPLE_I8_H
#define MEMRA_EXAMPLE_I8_H

#define EXAMPLE_I8_SCHEME "example_i8"
#define EXAMPLE_I8_ROW_BYTES(cols) (4 + (cols))
#define EXAMPLE_I8_LANES 32
#define EXAMPLE_I8_ROWS_PER_BLOCK 4 /* one warp per row, 4 warps per block */
#define EXAMPLE_I8_KERNEL "example_i8_gemv"
#define EXAMPLE_I8_MODULE "example_i8" /* example_i8.fatbin, beside the plugin's .so */

#endif
