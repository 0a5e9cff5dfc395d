// Weights a checkpoint stores already quantised (FP8 with its scales, NVFP4, ...), read as
// published by the quant plugin that knows the form (memra_quant_api.import_tensor, SDK
// 2.12); memra names no such form. For each tensor "<p>.weight" that is not a float tensor
// or has tensors "<p>.<x>" beside it (other than "<p>.bias"), the quant plugins are asked in
// load order; the first that reads it gives the scheme and the matrix the weight becomes and
// which siblings belong to it (those are not tensors of the model). A non-float weight no
// plugin reads is refused naming it; a form a plugin recognises but finds broken (a scale of
// the wrong shape, a non-finite scale) is refused with the plugin's reason. Used by
// memra-repack (repack/tool/source.cpp) and by the engine opening a checkpoint directly
// (host/engine/model_source.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "core/plugin_host/plugin_host.hpp"
#include "repack/checkpoint/safetensors.hpp"
#include "repack/checkpoint/tensor_assembly.hpp"

namespace memra {

// A checkpoint tensor as stored (safetensors): dtype as safetensors spells it ("F8_E4M3").
struct StoredForm {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

// One weight a quant plugin reads: what it becomes and how to write it.
class ImportedWeight {
 public:
  ImportedWeight(plugins::QuantPlugin plugin, const StoredForm& weight, std::vector<StoredForm> siblings, std::string scheme,
                 int64_t rows, int64_t cols);
  const std::string& scheme() const { return scheme_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  const std::string& plugin() const;
  // Bytes of `rows` rows in the scheme's layout.
  Result<uint64_t> bytes(int64_t rows) const;
  // Rows [row0, row0 + rows) in the scheme's layout into dst (bytes(rows) of them).
  Status write_rows(int64_t row0, int64_t rows, std::span<std::byte> dst) const;
  // The same rows as exact float32 values (written, then dequantised by the plugin).
  Status rows_to_f32(int64_t row0, int64_t rows, float* dst) const;

 private:
  plugins::QuantPlugin plugin_;
  std::vector<StoredForm> forms_;  // the weight, then its siblings (the views point into these)
  memra_checkpoint_tensor weight_{};
  std::vector<memra_checkpoint_tensor> siblings_;
  std::string scheme_;
  int64_t rows_ = 0, cols_ = 0;
};

struct ImportPlan {
  std::vector<std::shared_ptr<const ImportedWeight>> imported;  // per tensor: null unless a plugin reads it
  std::vector<bool> consumed;                                   // per tensor: a sibling read with its weight
};

Result<ImportPlan> plan_imports(const std::vector<StoredForm>& tensors, const plugins::PluginHost& plugins);

// A safetensors checkpoint's tensors for the family's assembly (assemble_tensors): the scales
// a quant plugin reads with their weight left out, each imported weight as the matrix it
// becomes (its scheme, [rows, cols], its bytes in that scheme), every other tensor as stored
// (scheme: its dtype in lower case). memra-repack and the engine opening a checkpoint
// directly both start here.
struct SafetensorsTensors {
  ImportPlan imports;               // per checkpoint tensor
  std::vector<StoredTensor> stored;
  std::vector<size_t> from;         // stored[i] is checkpoint.tensors()[from[i]]
  // The plugin reading stored[i] (null for a tensor as stored).
  const std::shared_ptr<const ImportedWeight>& imported(size_t i) const { return imports.imported.at(from.at(i)); }
};
Result<SafetensorsTensors> safetensors_tensors(const safetensors::Checkpoint& checkpoint, const plugins::PluginHost& plugins);

}  // namespace memra
