/* memra C ABI — the ops a forward pass finds by name (memra_backend_ops.op_find).
 *
 * Each op is a name plus a version of its attribute struct; a new op, or a new
 * version of one, is appended here in an ABI minor (docs/PLUGINS.md, "Adding an
 * op"). An attribute struct begins with struct_size like every public struct; a
 * version changes when a field's meaning changes, never to append. A plan lists the
 * ops it uses in memra_plan_info.required_ops so the host can refuse it at load.
 */
#ifndef MEMRA_OPS_H
#define MEMRA_OPS_H

#include "memra/abi.h"

MEMRA_EXTERN_C_BEGIN

/* decay_scan v1 (ABI 2.1): a decayed running sum over each sequence's tokens, kept in
 * the RECURRENT state of args.layer (state layout "decay_scan.v1": float32[width] per
 * sequence, bytes_per_sequence = 4 * width). For each token row t, in batch order,
 * with s the state of the row's sequence (batch->state_slots):
 *     s = decay * s + x[t];  y[t] = s        (float32, one rounding per operation)
 * inputs[0] = x [tokens][width], outputs[0] = y [tokens][width] (may alias x),
 * batch required, no weights. Rows of one sequence are in position order, so a
 * chunked prefill gives bitwise what one step gives. */
#define MEMRA_OP_DECAY_SCAN "decay_scan"
#define MEMRA_OP_DECAY_SCAN_V1 1u
#define MEMRA_STATE_LAYOUT_DECAY_SCAN_V1 "decay_scan.v1"

typedef struct memra_decay_scan_attrs_v1 {
  size_t struct_size;
  float decay;
  int32_t width;
} memra_decay_scan_attrs_v1;
#define MEMRA_DECAY_SCAN_ATTRS_V1_STRUCT_SIZE MEMRA_STRUCT_SIZE(memra_decay_scan_attrs_v1, width)

MEMRA_EXTERN_C_END

#endif /* MEMRA_OPS_H */
