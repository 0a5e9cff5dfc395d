// The gemma family's checkpoint knowledge: its architectures, config normalisation
// (raw HF config.json -> the normalised config) and tensor names.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace memra::gemma {

// The normalised config JSON; throws family::PluginError naming what is wrong or unsupported.
std::string normalize_config(const char* raw_json);

// Canonical (llama.cpp-style) name of a Hugging Face tensor, or nullopt when the family
// does not read it.
std::optional<std::string> canonical_hf_name(std::string_view hf_name);

// NULL-terminated: the HF classes this family serves.
const char* const* handled_architectures();

}  // namespace memra::gemma
