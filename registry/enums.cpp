// String forms of the registry's enums, and the known device architectures.
#include "registry/registry.hpp"

namespace memra::registry {

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::supported: return "supported";
    case Verdict::generic: return "generic";
    case Verdict::rejected: return "rejected";
  }
  return "generic";
}

Result<Verdict> parse_verdict(std::string_view text) {
  if (text == "supported") return Verdict::supported;
  if (text == "generic") return Verdict::generic;
  if (text == "rejected") return Verdict::rejected;
  return make_error(ErrorCode::invalid_argument,
                    "unknown verdict '" + std::string(text) + "'; use supported, generic or rejected");
}

const char* to_string(CheckpointFormat f) {
  switch (f) {
    case CheckpointFormat::safetensors: return "safetensors";
    case CheckpointFormat::gguf: return "gguf";
    case CheckpointFormat::memra: return "memra";
  }
  return "safetensors";
}

Result<CheckpointFormat> parse_format(std::string_view text) {
  if (text == "safetensors") return CheckpointFormat::safetensors;
  if (text == "gguf") return CheckpointFormat::gguf;
  if (text == "memra") return CheckpointFormat::memra;
  return make_error(ErrorCode::invalid_argument,
                    "unknown checkpoint format '" + std::string(text) + "'; use safetensors, gguf or memra");
}

const std::vector<std::string>& known_arches() {
  static const std::vector<std::string> arches = {"sm_90a", "sm_120a", "cpu"};
  return arches;
}

bool is_known_arch(std::string_view arch) {
  for (const auto& a : known_arches())
    if (a == arch) return true;
  return false;
}

}  // namespace memra::registry
