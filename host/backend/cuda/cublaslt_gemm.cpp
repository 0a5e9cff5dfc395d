#include "host/backend/cuda/cublaslt_gemm.hpp"

#include <cublasLt.h>
#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "host/backend/cuda/cu_error.hpp"

namespace memra::backend::cuda {

// The entry points this file calls, resolved from the library (never linked).
struct CublasLtGemm::Api {
  void* lib = nullptr;
  decltype(&cublasLtGetVersion) get_version = nullptr;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmulAlgoConfigGetAttribute) algo_get = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  ~Api() {
    if (lib) dlclose(lib);
  }
};

// One pinned algorithm for a (N, K, bias) shape; `ok` false: no invariant one (own GEMM).
struct CublasLtGemm::Plan {
  bool ok = false;
  std::string refused;  // why not ok (the log says it once per shape)
  cublasLtMatmulAlgo_t algo{};
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // the weights, [k][n] column-major (w[n][k] row-major), transposed
  ~Plan() = default;
};

namespace {

constexpr uint64_t kWorkspace = uint64_t{32} << 20;
constexpr int64_t kHeuristicM = 512;  // the M the heuristic picks for: a prefill chunk
constexpr int64_t kCheckM[] = {1, 17, 200};

std::vector<std::string> candidates(const std::string& path) {
  if (!path.empty()) return {path};
  std::vector<std::string> out = {"libcublasLt.so.13"};
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* root = std::getenv(env); root && *root) out.push_back(std::string(root) + "/lib64/libcublasLt.so.13");
  out.push_back("/usr/local/cuda/lib64/libcublasLt.so.13");
  out.push_back("/usr/local/cuda-13.0/lib64/libcublasLt.so.13");
  // The NVIDIA Python wheels (PyTorch's, e.g. /opt/torch/.venv).
  for (const char* pattern : {"/opt/*/.venv/lib/python3*/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
                              "/opt/*/.venv/lib/python3*/site-packages/nvidia/cublas/lib/libcublasLt.so.13",
                              "/usr/local/lib/python3*/dist-packages/nvidia/cu13/lib/libcublasLt.so.13",
                              "/usr/local/lib/python3*/dist-packages/nvidia/cublas/lib/libcublasLt.so.13"}) {
    glob_t g{};
    if (glob(pattern, 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    globfree(&g);
  }
  return out;
}

template <class F>
bool resolve(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

Error lt_error(cublasStatus_t s, const char* what) {
  return make_error(ErrorCode::internal, std::string("cuBLASLt ") + what + " failed (status " + std::to_string(static_cast<int>(s)) + ")");
}

// bf16 bits of small random values (the self-check's activations).
std::vector<uint16_t> random_bf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (uint16_t& b : v) {
    const float f = u(rng);
    uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    b = static_cast<uint16_t>(bits >> 16);  // truncation is fine: any bf16 values do
  }
  return v;
}

}  // namespace

std::unique_ptr<CublasLtGemm> CublasLtGemm::open(const std::string& path, CUstream stream, std::string* why) {
  auto api = std::make_unique<Api>();
  std::string tried;
  std::string found;
  for (const std::string& c : candidates(path)) {
    api->lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api->lib) {
      found = c;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + c;
  }
  if (!api->lib) {
    if (why) *why = "libcublasLt.so.13 not found (tried " + tried + ")";
    return nullptr;
  }
  const bool all = resolve(api->lib, "cublasLtGetVersion", api->get_version) && resolve(api->lib, "cublasLtCreate", api->create) &&
                   resolve(api->lib, "cublasLtDestroy", api->destroy) &&
                   resolve(api->lib, "cublasLtMatmulDescCreate", api->desc_create) &&
                   resolve(api->lib, "cublasLtMatmulDescDestroy", api->desc_destroy) &&
                   resolve(api->lib, "cublasLtMatmulDescSetAttribute", api->desc_set) &&
                   resolve(api->lib, "cublasLtMatrixLayoutCreate", api->layout_create) &&
                   resolve(api->lib, "cublasLtMatrixLayoutDestroy", api->layout_destroy) &&
                   resolve(api->lib, "cublasLtMatmulPreferenceCreate", api->pref_create) &&
                   resolve(api->lib, "cublasLtMatmulPreferenceDestroy", api->pref_destroy) &&
                   resolve(api->lib, "cublasLtMatmulPreferenceSetAttribute", api->pref_set) &&
                   resolve(api->lib, "cublasLtMatmulAlgoGetHeuristic", api->heuristic) &&
                   resolve(api->lib, "cublasLtMatmulAlgoConfigGetAttribute", api->algo_get) &&
                   resolve(api->lib, "cublasLtMatmul", api->matmul);
  if (!all) {
    if (why) *why = found + " lacks a cuBLASLt entry point this backend calls";
    return nullptr;
  }
  const size_t version = api->get_version();
  if (version / 10000 != CUBLAS_VER_MAJOR) {
    if (why) *why = found + " is cuBLASLt " + std::to_string(version) + "; this backend was built for major " + std::to_string(CUBLAS_VER_MAJOR);
    return nullptr;
  }
  std::unique_ptr<CublasLtGemm> g(new CublasLtGemm());
  cublasLtHandle_t h = nullptr;
  if (api->create(&h) != CUBLAS_STATUS_SUCCESS) {
    if (why) *why = "cublasLtCreate failed";
    return nullptr;
  }
  g->handle_ = h;
  g->api_ = std::move(api);
  g->library_ = found;
  g->stream_ = stream;
  if (cuMemAlloc(&g->workspace_, kWorkspace) != CUDA_SUCCESS) {
    if (why) *why = "no device memory for cuBLASLt's workspace";
    return nullptr;
  }
  g->workspace_bytes_ = kWorkspace;
  return g;
}

CublasLtGemm::~CublasLtGemm() {
  for (auto& [key, p] : plans_) {
    if (p->desc) api_->desc_destroy(p->desc);
    if (p->a) api_->layout_destroy(p->a);
  }
  if (workspace_) cuMemFree(workspace_);
  if (handle_ && api_) api_->destroy(static_cast<cublasLtHandle_t>(handle_));
}

int64_t CublasLtGemm::shapes_pinned() const {
  int64_t n = 0;
  for (const auto& [key, p] : plans_) n += p->ok;
  return n;
}

int64_t CublasLtGemm::shapes_refused() const { return static_cast<int64_t>(plans_.size()) - shapes_pinned(); }

Status CublasLtGemm::matmul(const Plan& p, CUdeviceptr w, int64_t n, int64_t k, CUdeviceptr x, int64_t m, CUdeviceptr out,
                            int64_t ldo, CUdeviceptr bias) {
  (void)n;
  cublasLtMatrixLayout_t b = nullptr, c = nullptr;
  cublasStatus_t s = api_->layout_create(&b, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k);
  if (s == CUBLAS_STATUS_SUCCESS) s = api_->layout_create(&c, CUDA_R_32F, static_cast<uint64_t>(n), static_cast<uint64_t>(m), ldo);
  if (s == CUBLAS_STATUS_SUCCESS && bias) {
    const void* bp = reinterpret_cast<const void*>(bias);
    s = api_->desc_set(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp);
  }
  const float one = 1.0f, zero = 0.0f;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = api_->matmul(static_cast<cublasLtHandle_t>(handle_), p.desc, &one, reinterpret_cast<const void*>(w), p.a,
                     reinterpret_cast<const void*>(x), b, &zero, reinterpret_cast<void*>(out), c, reinterpret_cast<void*>(out), c,
                     &p.algo, reinterpret_cast<void*>(workspace_), workspace_bytes_, stream_);
  if (b) api_->layout_destroy(b);
  if (c) api_->layout_destroy(c);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error(s, "matmul");
  return {};
}

Result<const CublasLtGemm::Plan*> CublasLtGemm::plan(CUdeviceptr w, int64_t n, int64_t k, CUdeviceptr bias) {
  const auto key = std::make_tuple(n, k, bias != 0);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto p = std::make_unique<Plan>();
  Plan& plan = *p;
  plans_.emplace(key, std::move(p));

  cublasStatus_t s = api_->desc_create(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const int32_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  if (s == CUBLAS_STATUS_SUCCESS) s = api_->desc_set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  if (s == CUBLAS_STATUS_SUCCESS) s = api_->desc_set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (s == CUBLAS_STATUS_SUCCESS && bias) {
    const cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bt = CUDA_R_32F;
    s = api_->desc_set(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    if (s == CUBLAS_STATUS_SUCCESS) s = api_->desc_set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
  }
  if (s == CUBLAS_STATUS_SUCCESS) s = api_->layout_create(&plan.a, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error(s, "descriptor setup");

  // Candidates at a prefill chunk's M, split-K and its reductions excluded.
  cublasLtMatrixLayout_t b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  s = api_->layout_create(&b, CUDA_R_16BF, static_cast<uint64_t>(k), kHeuristicM, k);
  if (s == CUBLAS_STATUS_SUCCESS) s = api_->layout_create(&c, CUDA_R_32F, static_cast<uint64_t>(n), kHeuristicM, n);
  if (s == CUBLAS_STATUS_SUCCESS) s = api_->pref_create(&pref);
  const uint64_t ws = workspace_bytes_;
  const uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_NONE;
  if (s == CUBLAS_STATUS_SUCCESS) s = api_->pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  if (s == CUBLAS_STATUS_SUCCESS) s = api_->pref_set(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions, sizeof reductions);
  cublasLtMatmulHeuristicResult_t found[8] = {};
  int count = 0;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = api_->heuristic(static_cast<cublasLtHandle_t>(handle_), plan.desc, plan.a, b, c, c, pref, 8, found, &count);
  if (pref) api_->pref_destroy(pref);
  if (b) api_->layout_destroy(b);
  if (c) api_->layout_destroy(c);
  if (s != CUBLAS_STATUS_SUCCESS || count == 0) {  // no algorithm: the own GEMM
    plan.refused = s != CUBLAS_STATUS_SUCCESS ? "the heuristic query failed (status " + std::to_string(static_cast<int>(s)) + ")"
                                              : "the heuristic offers no algorithm";
    return &plan;
  }

  // The self-check: random activations against the weights (and bias) of the first call.
  const int64_t max_m = kCheckM[sizeof kCheckM / sizeof kCheckM[0] - 1];
  const std::vector<uint16_t> xs = random_bf16(static_cast<size_t>(max_m * k), static_cast<uint32_t>(n * 31 + k));
  CUdeviceptr xd = 0, outs[3] = {0, 0, 0};
  auto release = [&] {
    for (CUdeviceptr d : {xd, outs[0], outs[1], outs[2]})
      if (d) cuMemFree(d);
  };
  const uint64_t out_bytes = static_cast<uint64_t>(max_m * n) * 4u;
  bool buffers = cuMemAlloc(&xd, xs.size() * 2) == CUDA_SUCCESS && cuMemcpyHtoD(xd, xs.data(), xs.size() * 2) == CUDA_SUCCESS;
  for (CUdeviceptr& o : outs) buffers = buffers && cuMemAlloc(&o, out_bytes) == CUDA_SUCCESS;
  if (!buffers) {
    release();
    plan.refused = "no device memory for the self-check";
    return &plan;  // not checkable (device memory): the own GEMM
  }
  int split = 0, failed = 0, differ = 0;
  for (int i = 0; i < count && !plan.ok; ++i) {
    int32_t splitk = 1;
    size_t written = 0;
    if (api_->algo_get(&found[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &written) == CUBLAS_STATUS_SUCCESS &&
        splitk > 1) {
      ++split;
      continue;
    }
    plan.algo = found[i].algo;
    bool ran = true;
    for (size_t j = 0; j < 3 && ran; ++j) ran = matmul(plan, w, n, k, xd, kCheckM[j], outs[j], n, bias).ok();
    if (!ran || cuStreamSynchronize(stream_) != CUDA_SUCCESS) {
      ++failed;
      continue;
    }
    // Row r of every run holds the same product: bitwise equal, or the algorithm's
    // reduction depends on M.
    std::vector<float> rows[3];
    for (size_t j = 0; j < 3; ++j) {
      rows[j].resize(static_cast<size_t>(kCheckM[0 + 1] * n));
      const uint64_t bytes = static_cast<uint64_t>(std::min<int64_t>(kCheckM[j], kCheckM[1]) * n) * 4u;
      cuMemcpyDtoH(rows[j].data(), outs[j], bytes);
    }
    const size_t row0 = static_cast<size_t>(n) * 4u, rows17 = static_cast<size_t>(kCheckM[1] * n) * 4u;
    plan.ok = std::memcmp(rows[0].data(), rows[1].data(), row0) == 0 && std::memcmp(rows[1].data(), rows[2].data(), rows17) == 0 &&
              std::memcmp(rows[0].data(), rows[2].data(), row0) == 0;
    differ += !plan.ok;
  }
  release();
  if (!plan.ok)
    plan.refused = "of " + std::to_string(count) + " candidate algorithms " + std::to_string(split) + " split K, " +
                   std::to_string(failed) + " failed to run, " + std::to_string(differ) + " gave rows that differ between M = 1, 17 and 200";
  return &plan;
}

Status CublasLtGemm::run(CUdeviceptr w, int64_t n, int64_t k, CUdeviceptr x, int64_t m, CUdeviceptr out, int64_t ldo,
                         CUdeviceptr bias) {
  auto p = plan(w, n, k, bias);
  if (!p) return p.error();
  if (!(*p)->ok)
    return make_error(ErrorCode::unsupported,
                      "no cuBLASLt algorithm is row invariant for " + std::to_string(n) + "x" + std::to_string(k) + ": " + (*p)->refused);
  return matmul(**p, w, n, k, x, m, out, ldo, bias);
}

}  // namespace memra::backend::cuda
