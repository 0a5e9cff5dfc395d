// Helpers for quant plugins' checkpoint importers (memra_quant_api.import_tensor, SDK 2.12):
// finding a weight's siblings by their suffix, reading float scales of any float dtype
// exactly, and the refusal message that names the tensor.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "memra/memra.h"

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

}  // namespace memra::quant_plugin::import
