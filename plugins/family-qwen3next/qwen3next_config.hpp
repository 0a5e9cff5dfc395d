// The qwen3next family's checkpoint knowledge: its architectures, config normalisation
// (raw HF config.json -> the normalised config) and tensor names.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace memra::qwen3next {

// The normalised config JSON; throws family::PluginError naming what is wrong or unsupported.
std::string normalize_config(const char* raw_json);

// Canonical name of a Hugging Face tensor, or nullopt when the family does not read it
// (the MTP head's mtp.* tensors until MTP lands, rotary buffers).
std::optional<std::string> canonical_hf_name(std::string_view hf_name);
// The stacked expert tensors a Hugging Face expert tensor is part of (memra/family.h
// tensor_parts, the JSON array); nullopt for every other tensor.
std::optional<std::string> hf_tensor_parts(std::string_view hf_name);

// NULL-terminated: the HF classes this family serves.
const char* const* handled_architectures();

}  // namespace memra::qwen3next
