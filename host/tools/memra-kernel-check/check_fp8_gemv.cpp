// The fp8 decode GEMV's prepared activations (kernels/matmul/fp8_act_ref.hpp) and the
// GEMV over them (kernels/matmul/gemv_mma_fp8.cuh), launched directly:
//  - memra_prepare_act_fp8_rows == ref::prepare_act_fp8 bit for bit (plane and back-scales),
//    rows in order and by index, guard tails poisoned;
//  - memra_gemv_fp8_mma_n{1,2} over the prepared rows == memra_gemv_fp8_scaled_n1 over
//    the f32 rows (the path it replaced, which scales and rounds x per block), bit for
//    bit, for M = 1..16 and 40, 16-byte and 4-byte weight loads, subnormal codes.
// The backend's matmul against the CPU reference and its batch invariance are in
// check_linear.cpp; the producers' fused rows in check_decode_fusion.cpp.
#include <cmath>
#include <cstring>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "host/tools/memra-kernel-check/fp8_gemv_util.hpp"
#include "kernels/matmul/fp8_act_ref.hpp"
#include "kernels/matmul/gemv_mma_layout.hpp"

namespace memra::kcheck {
namespace {

using i8::DevBuf;
using i8::Kernels;
constexpr uint32_t kPoison = 0x7fc0dead;  // a NaN no kernel writes

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Groups of every kind the preparation meets, by (row, group): ordinary values of any
// scale; all zeros; exact bf16 ties after scaling (low 16 mantissa bits 0x8000); groups
// below 2^-64 (E clamped to 127) with f32 subnormals; groups above 2^70 (E clamped to -7)
// with elements whose scaled value is an f32 subnormal; magnitudes spread over 2^+-40.
std::vector<float> activations(Rng& rng, int64_t m, int64_t cols) {
  std::vector<float> x(static_cast<size_t>(m * cols));
  const int64_t groups = cols / 128;
  for (int64_t t = 0; t < m; ++t)
    for (int64_t g = 0; g < groups; ++g) {
      float* xg = x.data() + t * cols + g * 128;
      const int kind = static_cast<int>((t * groups + g + t) % 6);
      const float scale = std::pow(10.0f, static_cast<float>(rng.uniform(-3, 3)));
      for (int i = 0; i < 128; ++i) {
        float v = rng.normal();
        uint32_t b;
        std::memcpy(&b, &v, 4);
        switch (kind) {
          case 0: v *= scale; break;
          case 1: v = 0.0f; break;
          case 2: v = from_bits((b & 0xffff0000u) | 0x8000u); break;
          case 3: v = i % 4 == 0 ? 1e-40f * static_cast<float>(rng.uniform(-1000, 1000)) : v * 1e-21f; break;
          case 4: v = i % 8 == 0 ? std::ldexp(v, -125) : i % 8 == 1 ? 0.0f : std::ldexp(v, 80); break;
          default: v = std::ldexp(v, rng.uniform(-40, 40)); break;
        }
        xg[i] = v;
      }
    }
  return x;
}

template <class T>
bool tail_poisoned(const std::vector<T>& v, size_t from, uint8_t byte) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  for (size_t i = from * sizeof(T); i < v.size() * sizeof(T); ++i)
    if (p[i] != byte) return false;
  return true;
}

void check_prepare(Device& d, Kernels& k, Report& r, Rng& rng, int64_t m, int64_t cols, bool by_index) {
  const std::string name = "fp8 act prepare M=" + std::to_string(m) + " cols=" + std::to_string(cols) + (by_index ? " rows by index" : "");
  if (!r.wants(name)) return;
  r.guard(name, [&] {
    // By index: the source holds m + 3 rows, output row i is source row (3i + 2) mod (m + 3).
    const int64_t src_rows = by_index ? m + 3 : m;
    const std::vector<float> x = activations(rng, src_rows, cols);
    std::vector<int32_t> idx(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) idx[static_cast<size_t>(i)] = static_cast<int32_t>(by_index ? (3 * i + 2) % src_rows : i);
    std::vector<float> picked(static_cast<size_t>(m * cols));
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(picked.data() + i * cols, x.data() + idx[static_cast<size_t>(i)] * cols, static_cast<size_t>(cols) * 4);
    const int64_t groups = m * cols / 128;
    std::vector<uint16_t> plane(static_cast<size_t>(m * cols));
    std::vector<float> back(static_cast<size_t>(groups));
    if (!ref::prepare_act_fp8(picked.data(), m, cols, plane.data(), back.data())) throw Failure("reference refused the shape");

    const size_t guard = 64;
    DevBuf xd(d, x.size() * 4), id(d, idx.size() * 4), pd(d, (plane.size() + guard) * 2), bd(d, (back.size() + guard) * 4);
    xd.put(x.data(), x.size() * 4);
    id.put(idx.data(), idx.size() * 4);
    const std::vector<uint8_t> poison((plane.size() + guard) * 2 + (back.size() + guard) * 4, 0xa5);
    pd.put(poison.data(), (plane.size() + guard) * 2);
    bd.put(poison.data(), (back.size() + guard) * 4);
    fp8::launch_prepare(k, xd.ptr(), cols, by_index ? id.ptr() : nullptr, m, pd.ptr(), bd.ptr());
    const auto pg = pd.get<uint16_t>(plane.size() + guard);
    const auto bg = bd.get<float>(back.size() + guard);
    size_t bad_plane = 0, bad_back = 0;
    for (size_t i = 0; i < plane.size(); ++i) bad_plane += pg[i] != plane[i];
    for (size_t i = 0; i < back.size(); ++i) bad_back += std::memcmp(&bg[i], &back[i], 4) != 0;
    const bool tails = tail_poisoned(pg, plane.size(), 0xa5) && tail_poisoned(bg, back.size(), 0xa5);
    r.add(name, bad_plane == 0 && bad_back == 0 && tails,
          "plane " + std::string(bad_plane == 0 ? "bitwise" : std::to_string(bad_plane) + " of " + std::to_string(plane.size()) + " differ") +
              ", back-scales " + (bad_back == 0 ? "bitwise" : std::to_string(bad_back) + " differ") + " == ref::prepare_act_fp8" +
              (tails ? "" : ", wrote past the end"));
  });
}

// The production GEMV over prepared rows against the scaled path, M = 1..16 and 40.
void check_prepared_gemv(Device& d, Kernels& k, Report& r, Rng& rng, int64_t rows, int64_t cols, const std::string& wflavour,
                         bool with_bias) {
  const std::string name = "fp8 gemv prepared == scaled " + std::to_string(rows) + "x" + std::to_string(cols) + " w=" + wflavour +
                           " M=1..16,40" + (with_bias ? " +bias" : "");
  if (!r.wants(name)) return;
  r.guard(name, [&] {
    constexpr int64_t kMaxM = 40;
    const std::vector<uint8_t> w = random_weight(rng, "fp8", rows, cols, wflavour);
    const std::vector<float> bias = rng.floats(static_cast<size_t>(rows));
    const std::vector<float> x = activations(rng, kMaxM, cols);
    DevBuf wd(d, w.size()), xd(d, x.size() * 4), pd(d, x.size() * 2), bkd(d, x.size() / 128 * 4), bd(d, bias.size() * 4);
    const size_t n = static_cast<size_t>(kMaxM * rows), guard = 256;
    DevBuf yp(d, (n + guard) * 4), ys(d, (n + guard) * 4);
    wd.put(w.data(), w.size());
    xd.put(x.data(), x.size() * 4);
    bd.put(bias.data(), bias.size() * 4);
    const std::vector<uint32_t> poison(n + guard, kPoison);
    memra_kernel* scaled = k.get("matmul_fp8", "memra_gemv_fp8_scaled_n1");
    memra_kernel* prod[2] = {k.get("matmul_fp8", "memra_gemv_fp8_mma_n1"), k.get("matmul_fp8", "memra_gemv_fp8_mma_n2")};
    const int warps = memra::gemv_mma::kFp8Warps;
    const void* b = with_bias ? bd.ptr() : nullptr;
    int runs = 0, bad = 0;
    std::string first_bad;
    for (int64_t m = 1; m <= kMaxM; m = m == 16 ? kMaxM : m + 1) {
      yp.put(poison.data(), poison.size() * 4);
      ys.put(poison.data(), poison.size() * 4);
      fp8::launch_prepare(k, xd.ptr(), cols, nullptr, m, pd.ptr(), bkd.ptr());
      const int nt = m > 8 ? 2 : 1;  // as the backend picks
      fp8::launch_gemv(k, prod[nt - 1], nt, warps, wd.ptr(), rows, cols, pd.ptr(), bkd.ptr(), m, yp.ptr(), b);
      fp8::launch_gemv(k, scaled, 1, warps, wd.ptr(), rows, cols, xd.ptr(), nullptr, m, ys.ptr(), b);
      const auto a = yp.get<float>(n + guard), c = ys.get<float>(n + guard);
      const size_t used = static_cast<size_t>(m * rows);
      const Comparison cmp = compare(std::vector<float>(a.begin(), a.begin() + static_cast<ptrdiff_t>(used)),
                                     std::vector<float>(c.begin(), c.begin() + static_cast<ptrdiff_t>(used)));
      const bool tails = std::memcmp(a.data() + used, poison.data(), (n + guard - used) * 4) == 0 &&
                         std::memcmp(c.data() + used, poison.data(), (n + guard - used) * 4) == 0;
      ++runs;
      if (!cmp.bitwise || !tails) {
        ++bad;
        if (first_bad.empty())
          first_bad = "; first: M=" + std::to_string(m) + " nmse " + fmt(cmp.nmse) + (tails ? "" : " (wrote past its rows)");
      }
      if (m == kMaxM) break;
    }
    r.add(name, bad == 0, std::to_string(runs - bad) + "/" + std::to_string(runs) + " launches bitwise == memra_gemv_fp8_scaled_n1" + first_bad);
  });
}

}  // namespace

void check_fp8_gemv(Device& d, Report& r, const CheckOptions& o) {
  Rng rng(o.seed ^ 0xf8ac7ull);
  Kernels k(d);
  for (bool by_index : {false, true}) {
    check_prepare(d, k, r, rng, 1, 4096, by_index);
    check_prepare(d, k, r, rng, 7, 12288, by_index);
    check_prepare(d, k, r, rng, 40, 384, by_index);
  }
  // 1024 columns: 16-byte code loads; 384: rows of 396 bytes, the 4-byte path.
  check_prepared_gemv(d, k, r, rng, 96, 1024, "random", true);
  check_prepared_gemv(d, k, r, rng, 40, 384, "random", false);
  check_prepared_gemv(d, k, r, rng, 64, 1024, "subnormal", false);
  if (!o.quick) check_prepared_gemv(d, k, r, rng, 300, 4096, "random", false);
}

}  // namespace memra::kcheck
