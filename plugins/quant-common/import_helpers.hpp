// Helpers for quant plugins' checkpoint importers (memra_quant_api.import_tensor, SDK 2.12):
// finding a weight's siblings by their suffix, reading float scales of any float dtype
// exactly, and the refusal message that names the tensor.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "memra/memra.h"
#include "quant_plugin_common.hpp"

namespace memra::quant_plugin::import {

// The sibling "<prefix>.<suffix>" of args' weight, its index in *index; nullptr when absent.
const memra_checkpoint_tensor* sibling(const memra_import_args& args, std::string_view suffix, size_t* index = nullptr);

// Element count of a tensor's shape (1 for a scalar).
int64_t elements(const memra_checkpoint_tensor& t);

// True for the float dtypes a scale may be stored in (F32, BF16, F16, F8_E4M3).
bool float_dtype(const memra_checkpoint_tensor& t);

// Element i of a float tensor as float32 (exact widening); float_dtype(t) must hold.
float float_at(const memra_checkpoint_tensor& t, int64_t i);

// Checks that every element of a float tensor is finite; else a message naming the tensor
// and the first bad element's index.
bool all_finite(const memra_checkpoint_tensor& t, std::string* why);

// "<name> [d0, d1, ...] <dtype>" for messages.
std::string describe(const memra_checkpoint_tensor& t);

// The import_tensor protocol around a plugin's form reader. Form: the plugin's own record of a
// matched weight with `scheme` (const char*), `rows`, `cols`, `used` and `row_bytes` (of its
// layout); match(const memra_import_args&, Form*) returns OK, UNSUPPORTED (not this form) or a
// reported refusal; write(const Form&, uint8_t* dst) fills rows [row0, row0 + row_count).
template <class Form, class Match, class Write>
memra_status run_import(memra_plugin_ctx* ctx, memra_import_args* a, Match&& match, Write&& write) {
  return guarded(ctx, [&]() -> memra_status {
    if (!a || !MEMRA_STRUCT_HAS(a, memra_import_args, used) || !a->weight || a->sibling_count > 64)
      return report(ctx, MEMRA_ERR_ABI_MISMATCH, std::string(ctx->name) + ": import_tensor: bad arguments");
    Form f;
    if (const memra_status st = match(*a, &f); st != MEMRA_OK) return st;
    if (!a->dst) {
      std::snprintf(a->scheme, sizeof(a->scheme), "%s", f.scheme);
      a->rows = f.rows, a->cols = f.cols, a->used = f.used;
      return MEMRA_OK;
    }
    if (a->row0 < 0 || a->row_count <= 0 || a->row0 + a->row_count > f.rows || a->dst_bytes < f.row_bytes * static_cast<uint64_t>(a->row_count))
      return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, std::string(ctx->name) + ": import_tensor: bad row range or destination");
    return write(f, static_cast<uint8_t*>(a->dst));
  });
}

}  // namespace memra::quant_plugin::import
