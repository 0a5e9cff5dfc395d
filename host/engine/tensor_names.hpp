// Canonical tensor names. memra names weights the way GGUF does
// ("blk.3.attn_q.weight"), so GGUF files need no renaming and Hugging Face
// checkpoints are mapped once, here, for every family.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace memra::engine {

// Canonical name of a Hugging Face tensor name, or nullopt when it is not one the
// families use (e.g. rotary inv_freq buffers).
std::optional<std::string> canonical_tensor_name(std::string_view hf_name);

}  // namespace memra::engine
