// The llama family's checkpoint knowledge: its architectures, config normalisation
// (raw HF config.json / GGUF metadata -> normalised config) and tensor names.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace memra::llama {

// The normalised config JSON; throws family::PluginError naming what is wrong or unsupported.
std::string normalize_config(const char* raw_json);

// Canonical name of a Hugging Face tensor, or nullopt when the family does not read it
// (e.g. rotary inv_freq buffers). GGUF names are canonical already.
std::optional<std::string> canonical_hf_name(std::string_view hf_name);
// The stacked expert tensors a Hugging Face expert tensor is part of (memra/family.h
// tensor_parts, the JSON array); nullopt for every other tensor.
std::optional<std::string> hf_tensor_parts(std::string_view hf_name);

// NULL-terminated: the HF classes and GGUF architectures this family serves.
const char* const* handled_architectures();

}  // namespace memra::llama
