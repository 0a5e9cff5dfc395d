/* example_q8x — q8_0's arithmetic in an aligned layout, multiplied by memra's int8x32
 * activation rows on the backend's INT8 GEMV form (memra/quant.h): the layout and the
 * arithmetic shared by the plugin's CPU code (example_q8x.c) and its CUDA kernels
 * (example_q8x.cu), so the two cannot drift apart.
 *
 * Layout: a [rows][cols] matrix (cols a multiple of 256) is `rows` records of
 * EXAMPLE_Q8X_ROW_BYTES(cols) bytes: cols int8 codes, then cols / 32 float16 scales
 * (little-endian); w[r][c] = code[c] * scale[c / 32]. Every record is 16-byte aligned
 * (cols + cols / 16 is a multiple of 16), so the codes load as 16-byte vectors; the bytes
 * per weight are q8_0's (34 per 32).
 *
 * Activations (the backend produces them, memra/quant.h MEMRA_ACT_INT8X32): per 32
 * elements of a row int8 codes a and {d, s}; a row of the output is
 *   y[t][r] = sum over units u of (float)isum_u * (dw_u * d_u),  isum_u = sum_j q_j * a_j
 * with the f32 sums in this order: thread l of warp w (EXAMPLE_Q8X_WARPS warps of 32)
 * takes units u = 32 w + l + 128 k for k = 0, 1, ... and keeps acc = fmaf(isum, dw * d,
 * acc); each warp folds its lanes by xor shuffles (v = v + v[lane ^ off], off = 16, 8, 4,
 * 2, 1); then y = ((v0 + v1) + v2) + v3, plus the bias when there is one. isum is below
 * 2^24, so (float)isum is exact; the CPU reference does the same operations, so the two
 * agree bit for bit and a token's row never depends on the launch or the batch. */
#ifndef MEMRA_EXAMPLE_Q8X_H
#define MEMRA_EXAMPLE_Q8X_H

#define EXAMPLE_Q8X_SCHEME "example_q8x"
#define EXAMPLE_Q8X_ROW_BYTES(cols) ((cols) + (cols) / 16)
#define EXAMPLE_Q8X_MODULE "example_q8x" /* example_q8x.fatbin, beside the plugin's .so */
#define EXAMPLE_Q8X_GEMV "example_q8x_gemv"       /* entries example_q8x_gemv_r4_t{1,2,4,8,16} */
#define EXAMPLE_Q8X_DEQUANT "example_q8x_dequant" /* the prompt GEMM's dequantiser */
#define EXAMPLE_Q8X_ROWS 4                        /* weight rows per block (R) */
#define EXAMPLE_Q8X_WARPS 4                       /* 128 threads a block */
#define EXAMPLE_Q8X_UNIT 32                       /* elements per activation block */

#endif
