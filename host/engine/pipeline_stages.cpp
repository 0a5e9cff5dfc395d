#include "host/engine/pipeline_stages.hpp"

#include <cstring>

namespace memra::engine {
namespace {

class CpuStage final : public PipelineStage {
 public:
  CpuStage(const backend::KvCacheConfig& kv, backend::QuantLookup lookup, backend::RecurrentStateConfig state)
      : backend_(kv, std::move(lookup), std::move(state)) {}
  const memra_backend_ops* ops() const override { return backend_.ops(); }
  Status allocate_kv() override {
    if (backend_.allocate_kv() != MEMRA_OK) return make_error(ErrorCode::unsupported, backend_.last_error());
    return {};
  }
  Status begin_step() override {
    backend_.begin_step();
    return {};
  }
  Status prepare_batch(const memra_forward_batch& batch) override {
    backend_.prepare_batch(&batch);  // its matmuls' prompt rows
    return {};
  }
  Status copy_kv_block(int32_t from, int32_t to) override {
    const int64_t n = backend_.kv_config().num_blocks;
    if (from < 0 || to < 0 || from >= n || to >= n) return make_error(ErrorCode::invalid_argument, "copy_kv_block: block out of range");
    backend_.copy_kv_block(from, to);
    return {};
  }
  Status copy_state_slot(int32_t from, int32_t to) override { return wrap(backend_.copy_state_slot(from, to)); }
  Status reset_state_slot(int32_t slot) override { return wrap(backend_.reset_state_slot(slot)); }
  std::string last_error() const override { return backend_.last_error(); }
  Status copy_from(PipelineStage& from, void* dst, const void* src, uint64_t bytes) override {
    if (backend::CudaBackendHandle* c = from.cuda()) {
      // A CUDA stage into host memory: waits for the sender's stream.
      const memra_status st = c->api().copy_to_host(c->get(), dst, src, bytes);
      if (st != MEMRA_OK) return c->error(st, "pipeline copy to the CPU stage");
      return {};
    }
    std::memcpy(dst, src, bytes);
    return {};
  }
  std::string name() const override { return "cpu"; }

 private:
  Status wrap(memra_status st) const {
    if (st != MEMRA_OK) return make_error(ErrorCode::invalid_argument, backend_.last_error());
    return {};
  }
  backend::CpuBackend backend_;
};

class CudaStage final : public PipelineStage {
 public:
  CudaStage(std::unique_ptr<backend::CudaBackendHandle> h, const memra_cuda_kv_config& kv, int device)
      : handle_(std::move(h)), kv_(kv), device_(device) {}
  const memra_backend_ops* ops() const override { return handle_->ops(); }
  Status allocate_kv() override { return handle_->allocate_kv(kv_); }
  Status begin_step() override { return handle_->begin_step(); }
  Status begin_step_slot(int32_t slot) override { return handle_->begin_step_slot(slot); }
  Status wait_logits(int32_t slot) override { return handle_->wait_logits(slot); }
  Status sample_rows(const memra_cuda_sample_request& request, int32_t* tokens) override {
    return handle_->sample_rows(request, tokens);
  }
  Status copy_kv_block(int32_t from, int32_t to) override { return handle_->copy_kv_block(from, to); }
  std::string last_error() const override { return handle_->last_error(); }
  Status copy_from(PipelineStage& from, void* dst, const void* src, uint64_t bytes) override {
    if (backend::CudaBackendHandle* c = from.cuda()) return handle_->copy_from(*c, dst, src, bytes);
    // From host memory (a CPU stage): a synchronous upload.
    const memra_status st = handle_->api().copy_to_device(handle_->get(), dst, src, bytes);
    if (st != MEMRA_OK) return handle_->error(st, "pipeline copy from the CPU stage");
    return {};
  }
  Status prepare_batch(const memra_forward_batch& batch) override { return handle_->prepare_batch(batch); }
  std::string name() const override { return "cuda:" + std::to_string(device_); }
  backend::CudaBackendHandle* cuda() override { return handle_.get(); }

 private:
  std::unique_ptr<backend::CudaBackendHandle> handle_;
  memra_cuda_kv_config kv_;
  int device_;
};

}  // namespace

std::unique_ptr<PipelineStage> make_cpu_stage(const backend::KvCacheConfig& kv, backend::QuantLookup quant_lookup,
                                              backend::RecurrentStateConfig state) {
  return std::make_unique<CpuStage>(kv, std::move(quant_lookup), std::move(state));
}

Result<std::unique_ptr<PipelineStage>> make_cuda_stage(const backend::CudaBackendOpenOptions& options,
                                                       const std::vector<memra_weight>& weights,
                                                       const memra_cuda_kv_config& kv) {
  auto h = backend::CudaBackendHandle::create(options);
  if (!h) return h.error();
  const memra_weight_set set{MEMRA_WEIGHT_SET_STRUCT_SIZE, weights.size(), weights.data()};
  MEMRA_TRY((*h)->upload_weights(set));
  return std::unique_ptr<PipelineStage>(new CudaStage(std::move(*h), kv, options.device));
}

}  // namespace memra::engine
