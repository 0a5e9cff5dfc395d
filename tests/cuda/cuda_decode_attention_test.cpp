// The decode attention kernels (kernels/attention/paged_attention.cu) run on the host by
// the emulator of decode_attention_emulator.hpp (no GPU needed): every row against the
// CPU reference (kAttentionBound), and bitwise: a row alone == in a batch == through a
// row list (a step whose prompt rows run the prefill kernel), V beside the K rows == V
// reusing their space; over f32 caches (CUDA-core kernel) and f16 and bf16 caches (the
// tensor-core kernels, their mma and ldmatrix emulated from the PTX fragment layouts; and fp8
// caches, the reference's own codes and scales, through f16 tiles). Each row
// has its own sequence whose cache positions outside what the row may see are NaN, so a
// read past its window or its last position shows up. memra-kernel-check runs the same
// properties on the GPU.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "kernels/attention/attention_ref.hpp"
#include "kernels/matmul/fp8_act_ref.hpp"
#include "plugins/quant-common/gemv_int8_ref.hpp"
#include "repack/quant/fp_convert.hpp"
#include "tests/cuda/decode_attention_emulator.hpp"

namespace {

constexpr int kBlock = 16;

struct Config {
  int heads, kv_heads, head_dim, window;
  float softcap;
};

// A cache of one sequence per row (scattered blocks); row r's sequence holds K/V at the
// positions row r sees, NaN elsewhere. The f32 cache's values are those of the `values`
// cache (f16- or bf16-representable), or unrounded when it is f32.
using memra::ref::KvElement;
const char* element_name(KvElement e) {
  return e == KvElement::f16 ? "f16 KV" : e == KvElement::bf16 ? "bf16 KV" : e == KvElement::fp8 ? "fp8 KV" : "f32 KV";
}

struct Problem {
  Config c;
  std::vector<int32_t> pos, seq, tables;
  int max_blocks = 0, num_blocks = 0;
  std::vector<float> kf, vf;        // f32 cache
  std::vector<uint16_t> kh, vh;     // f16 cache (bits)
  std::vector<uint16_t> kb, vb;     // bf16 cache (bits)
  std::vector<uint8_t> k8, v8;      // fp8 cache (blocks of codes, then scales; head_dim % 16 == 0 only)
  std::vector<float> q;             // [rows][heads * head_dim]
  // Per row, the first position the step writes for its sequence (the kernel stages the
  // rows before it ahead of the PDL wait); empty: none is known, every row waits.
  std::vector<int32_t> fresh;

  Problem(const Config& cfg, const std::vector<int32_t>& positions, KvElement values, uint32_t seed) : c(cfg), pos(positions) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    const int rows = static_cast<int>(pos.size());
    int top = 0;
    for (int32_t p : pos) top = std::max(top, p);
    max_blocks = top / kBlock + 1;
    num_blocks = rows * max_blocks;
    std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
    for (int i = 0; i < num_blocks; ++i) ids[static_cast<size_t>(i)] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    tables = ids;
    const size_t row_w = static_cast<size_t>(c.kv_heads) * c.head_dim, n = static_cast<size_t>(num_blocks) * kBlock * row_w;
    kf.assign(n, NAN), vf.assign(n, NAN), kh.assign(n, 0x7e00), vh.assign(n, 0x7e00), kb.assign(n, 0x7fc0), vb.assign(n, 0x7fc0);
    // fp8: NaN codes (0x7f) and NaN scales (0xff bytes) where nothing was written.
    const size_t fp8_bytes = static_cast<size_t>(num_blocks) * static_cast<size_t>(memra::attn::fp8_kv_block_bytes(kBlock, c.kv_heads, c.head_dim));
    if (c.head_dim % 16 == 0) k8.assign(fp8_bytes, 0x7f), v8.assign(fp8_bytes, 0x7f);
    for (int b = 0; b < num_blocks && !k8.empty(); ++b) {
      const size_t bb = static_cast<size_t>(memra::attn::fp8_kv_block_bytes(kBlock, c.kv_heads, c.head_dim));
      const size_t codes = static_cast<size_t>(kBlock) * row_w;
      std::fill(k8.begin() + b * bb + codes, k8.begin() + (b + 1) * bb, 0xff);
      std::fill(v8.begin() + b * bb + codes, v8.begin() + (b + 1) * bb, 0xff);
    }
    std::vector<float> krow(row_w), vrow(row_w);
    for (int r = 0; r < rows; ++r) {
      seq.push_back(r);
      const int32_t first = c.window > 0 ? std::max(0, pos[static_cast<size_t>(r)] - c.window + 1) : 0;
      for (int32_t p = first; p <= pos[static_cast<size_t>(r)]; ++p) {
        const size_t off = (static_cast<size_t>(tables[static_cast<size_t>(r * max_blocks + p / kBlock)]) * kBlock + p % kBlock) * row_w;
        for (size_t i = 0; i < row_w; ++i) {
          const float a = nd(rng), b = nd(rng);
          krow[i] = a, vrow[i] = b;
          kh[off + i] = memra::quant::f32_to_fp16(a), vh[off + i] = memra::quant::f32_to_fp16(b);
          kb[off + i] = memra::quant::f32_to_bf16(a), vb[off + i] = memra::quant::f32_to_bf16(b);
          kf[off + i] = values == KvElement::f16 ? memra::quant::fp16_to_f32(kh[off + i])
                        : values == KvElement::bf16 ? memra::quant::bf16_to_f32(kb[off + i]) : a;
          vf[off + i] = values == KvElement::f16 ? memra::quant::fp16_to_f32(vh[off + i])
                        : values == KvElement::bf16 ? memra::quant::bf16_to_f32(vb[off + i]) : b;
        }
        if (!k8.empty()) memra::ref::paged_kv_write(fp8_layer(), tables.data() + r * max_blocks, p, krow.data(), vrow.data());
      }
    }
    q.resize(static_cast<size_t>(rows) * c.heads * c.head_dim);
    for (float& x : q) x = nd(rng);
  }

  int64_t width() const { return static_cast<int64_t>(c.heads) * c.head_dim; }
  memra::ref::PagedKvLayer fp8_layer() const {
    memra::ref::PagedKvLayer L;
    L.k = const_cast<uint8_t*>(k8.data());
    L.v = const_cast<uint8_t*>(v8.data());
    L.block_size = kBlock;
    L.kv_heads = c.kv_heads;
    L.head_dim = c.head_dim;
    L.element = KvElement::fp8;
    return L;
  }
  int chunks_of(int32_t p) const {
    const int32_t first = c.window > 0 ? std::max(0, p - c.window + 1) : 0;
    return (p - first + 1 + memra::attn::kDecodeChunk - 1) / memra::attn::kDecodeChunk;
  }

  // The kernels over `entries` (all rows when empty: no row list), as the backend launches
  // them: rows of one chunk each write the output from the chunk kernel, unless `merge`.
  // With `quantised` (no row list), the kernel that writes the output also writes it as
  // int8x32 rows: codes into quantised->first, {d, s} per block into quantised->second.
  // With `prepared` (one-chunk rows, no row list), the chunk kernel also writes the fp8
  // GEMV's rows: the bf16 plane into prepared->first, 2^(120 - E) per group into ->second.
  std::vector<float> gpu(KvElement element, bool v_separate, const std::vector<int32_t>& entries = {},
                         bool merge = false, std::pair<std::vector<int8_t>, std::vector<float>>* quantised = nullptr,
                         std::pair<std::vector<uint16_t>, std::vector<float>>* prepared = nullptr) const {
    const int E = entries.empty() ? static_cast<int>(pos.size()) : static_cast<int>(entries.size());
    const int32_t* rows = entries.empty() ? nullptr : entries.data();
    const int32_t* fresh_from = fresh.empty() ? nullptr : fresh.data();
    int max_chunks = 1;
    for (int e = 0; e < E; ++e) max_chunks = std::max(max_chunks, chunks_of(pos[static_cast<size_t>(rows ? rows[e] : e)]));
    std::vector<float> part_o(static_cast<size_t>(E) * c.heads * max_chunks * c.head_dim, NAN);
    std::vector<float> part_ml(static_cast<size_t>(E) * c.heads * max_chunks * 2, NAN);
    std::vector<float> out(q.size(), 0.0f);
    merge = merge || max_chunks > 1;
    float* direct = merge ? nullptr : out.data();
    int8_t* xq = nullptr;
    float2* xm = nullptr;
    if (quantised) {
      quantised->first.assign(out.size(), 0x55);
      quantised->second.assign(out.size() / 16, NAN);
      xq = quantised->first.data();
      xm = reinterpret_cast<float2*>(quantised->second.data());
    }
    uint2* plane = nullptr;
    float* back = nullptr;
    if (prepared) {
      prepared->first.assign(out.size(), 0x5555);
      prepared->second.assign(out.size() / 128, NAN);
      plane = reinterpret_cast<uint2*>(prepared->first.data());
      back = prepared->second.data();
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const auto* kbf = reinterpret_cast<const __nv_bfloat16*>(kb.data());
    const auto* vbf = reinterpret_cast<const __nv_bfloat16*>(vb.data());
    const auto* khf = reinterpret_cast<const __half*>(kh.data());
    const auto* vhf = reinterpret_cast<const __half*>(vh.data());
    memra::decode_emu::launch(static_cast<unsigned>(E * c.kv_heads), static_cast<unsigned>(max_chunks), [&] {
      if (element == KvElement::f16)
        memra_attention_chunk_f16(q.data(), khf, vhf, c.heads, c.kv_heads, c.head_dim, kBlock, pos.data(), seq.data(),
                                  tables.data(), max_blocks, scale, c.window, c.softcap, max_chunks, part_o.data(),
                                  part_ml.data(), rows, fresh_from, v_separate ? 1 : 0, direct, xq, xm, plane, back);
      else if (element == KvElement::fp8)
        memra_attention_chunk_fp8(q.data(), reinterpret_cast<const Fp8E4m3*>(k8.data()), reinterpret_cast<const Fp8E4m3*>(v8.data()),
                                  c.heads, c.kv_heads, c.head_dim, kBlock, pos.data(), seq.data(), tables.data(), max_blocks,
                                  scale, c.window, c.softcap, max_chunks, part_o.data(), part_ml.data(), rows, fresh_from,
                                  v_separate ? 1 : 0, direct, xq, xm, plane, back);
      else if (element == KvElement::bf16)
        memra_attention_chunk_bf16(q.data(), kbf, vbf, c.heads, c.kv_heads, c.head_dim, kBlock, pos.data(), seq.data(),
                                   tables.data(), max_blocks, scale, c.window, c.softcap, max_chunks, part_o.data(),
                                   part_ml.data(), rows, fresh_from, v_separate ? 1 : 0, direct, xq, xm, plane, back);
      else
        memra_attention_chunk(q.data(), kf.data(), vf.data(), c.heads, c.kv_heads, c.head_dim, kBlock, pos.data(),
                              seq.data(), tables.data(), max_blocks, scale, c.window, c.softcap, max_chunks,
                              part_o.data(), part_ml.data(), rows, fresh_from, v_separate ? 1 : 0, direct, xq, xm, plane, back);
    });
    if (!merge) return out;
    memra::decode_emu::launch(static_cast<unsigned>(E * c.heads), static_cast<unsigned>(memra::attn::decode_combine_slices(c.head_dim)), [&] {
      memra_attention_combine(part_o.data(), part_ml.data(), pos.data(), c.heads, c.head_dim, c.window, max_chunks,
                              out.data(), rows, xq, xm);
    });
    return out;
  }

  std::vector<float> reference(KvElement element) const {
    std::vector<float> out(q.size());
    memra::ref::PagedKvLayer L;
    const auto plane = [&](const std::vector<float>& f, const std::vector<uint16_t>& h, const std::vector<uint16_t>& b) {
      return element == KvElement::f16    ? static_cast<void*>(const_cast<uint16_t*>(h.data()))
             : element == KvElement::bf16 ? static_cast<void*>(const_cast<uint16_t*>(b.data()))
                                          : static_cast<void*>(const_cast<float*>(f.data()));
    };
    L.k = plane(kf, kh, kb);
    L.v = plane(vf, vh, vb);
    L.block_size = kBlock;
    L.kv_heads = c.kv_heads;
    L.head_dim = c.head_dim;
    L.element = element;
    if (element == KvElement::fp8) L = fp8_layer();
    for (size_t r = 0; r < pos.size(); ++r)
      memra::ref::paged_attention(L, tables.data() + r * static_cast<size_t>(max_blocks), pos[r],
                                  q.data() + r * static_cast<size_t>(width()), c.heads,
                                  1.0f / std::sqrt(static_cast<float>(c.head_dim)), c.window, c.softcap,
                                  out.data() + r * static_cast<size_t>(width()));
    return out;
  }
};

double nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    e += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    s += static_cast<double>(b[i]) * b[i];
  }
  return e / s;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// Positions: one-row chunks, chunk edges, several chunks (the last one partial).
const std::vector<int32_t> kPositions = {0, 5, 63, 64, 65, 200};

void check_config(const Config& c) {
  for (const KvElement element : {KvElement::f32, KvElement::f16, KvElement::bf16, KvElement::fp8}) {
    if (element == KvElement::fp8 && c.head_dim % 16 != 0) continue;  // fp8 rows are staged in 16-byte pieces
    SCOPED_TRACE(element_name(element));
    const Problem p(c, kPositions, KvElement::f32, 7u + static_cast<uint32_t>(c.head_dim * 31 + c.heads));
    const auto out = p.gpu(element, true);
    const double e = nmse(out, p.reference(element));
    EXPECT_LE(e, memra::kcheck::kAttentionBound) << "against the reference";
    EXPECT_TRUE(same_bits(p.gpu(element, false).data(), out.data(), out.size())) << "V reusing K's space";
    // Rows staged before the PDL wait (a decode step: lag 0; verify-like steps whose fresh
    // rows span chunks; everything stable) land as the waited-for ones: bitwise the same.
    for (const auto& [lag, v_separate] : {std::pair{0, true}, std::pair{70, true}, std::pair{1 << 20, false}}) {
      Problem staged = p;
      staged.fresh.resize(p.pos.size());
      for (size_t r = 0; r < p.pos.size(); ++r) staged.fresh[r] = std::max(0, p.pos[r] - lag);
      EXPECT_TRUE(same_bits(staged.gpu(element, v_separate).data(), out.data(), out.size()))
          << "rows before fresh_from staged ahead, lag " << lag << (v_separate ? "" : ", V reusing K's space");
    }
    const size_t w = static_cast<size_t>(p.width());
    const std::vector<int32_t> list = {5, 1, 3};  // rows 5, 1, 3 through a row list
    const auto listed = p.gpu(element, true, list);
    for (const int32_t r : list)
      EXPECT_TRUE(same_bits(listed.data() + r * w, out.data() + r * w, w)) << "row " << r << " through a row list";
    Problem one = p;  // the last row alone: the same sequence, as a one-row step
    one.pos = {kPositions.back()};
    one.seq = {static_cast<int32_t>(kPositions.size()) - 1};
    one.q.assign(p.q.end() - static_cast<std::ptrdiff_t>(w), p.q.end());
    const auto solo = one.gpu(element, true);
    EXPECT_TRUE(same_bits(solo.data(), out.data() + (kPositions.size() - 1) * w, w)) << "row alone vs in the batch";
  }
}

TEST(CudaDecodeAttentionEmulated, Gqa8x2Hd128) { check_config({8, 2, 128, 0, 0.0f}); }
TEST(CudaDecodeAttentionEmulated, Mha4Hd64Window100Softcap30) { check_config({4, 4, 64, 100, 30.0f}); }
TEST(CudaDecodeAttentionEmulated, Gqa10x1Hd128Window70) { check_config({10, 1, 128, 70, 0.0f}); }
TEST(CudaDecodeAttentionEmulated, Gqa6x1Hd96Softcap50) { check_config({6, 1, 96, 0, 50.0f}); }
TEST(CudaDecodeAttentionEmulated, Mha2Hd256) { check_config({2, 2, 256, 0, 0.0f}); }
// head_dim % 16 == 8: the tensor-core kernels' last k step reads the zeroed row pads.
TEST(CudaDecodeAttentionEmulated, Gqa4x2Hd72) { check_config({4, 2, 72, 0, 0.0f}); }
// A q-head group over 16: two m-tiles of heads.
TEST(CudaDecodeAttentionEmulated, Gqa20x1Hd64) { check_config({20, 1, 64, 0, 0.0f}); }

// Steps whose rows all fit one chunk skip the merge pass: bitwise what the merge writes,
// and within the reference's bound.
TEST(CudaDecodeAttentionEmulated, OneChunkRowsWriteTheMergedOutputThemselves) {
  for (const KvElement e : {KvElement::f32, KvElement::f16, KvElement::bf16, KvElement::fp8})
    for (const Config& c : {Config{8, 2, 128, 0, 0.0f}, Config{6, 1, 96, 0, 50.0f}, Config{4, 4, 64, 30, 30.0f},
                            Config{2, 2, 256, 0, 0.0f}}) {
      const Problem p(c, {0, 5, 63, 40}, KvElement::f32, 5);
      const auto merged = p.gpu(e, true, {}, true), direct = p.gpu(e, true);
      EXPECT_TRUE(same_bits(merged.data(), direct.data(), merged.size())) << element_name(e) << " hd" << c.head_dim;
      EXPECT_TRUE(same_bits(p.gpu(e, false).data(), direct.data(), direct.size())) << "V reusing K's space";
      EXPECT_TRUE(same_bits(p.gpu(e, true, {3, 0}).data() + 3 * p.width(), direct.data() + 3 * p.width(),
                            static_cast<size_t>(p.width())))
          << "through a row list";
      EXPECT_LE(nmse(direct, p.reference(e)), memra::kcheck::kAttentionBound);
    }
}

// With integer-activation weights the kernel that writes the output (the chunk kernel for
// one-chunk steps, else the merge) also writes the o projection's int8x32 rows: exactly
// ref::quantize_act_q8 of that output, and the output itself unchanged.
TEST(CudaDecodeAttentionEmulated, FusedInt8RowsAreTheReferenceQuantisationOfTheOutput) {
  for (const KvElement e : {KvElement::f32, KvElement::bf16, KvElement::fp8})
    for (const Config& c : {Config{8, 2, 128, 0, 0.0f}, Config{6, 1, 96, 0, 50.0f}, Config{4, 4, 64, 30, 30.0f}})
      for (const auto& positions : {std::vector<int32_t>{0, 5, 63, 40}, kPositions}) {
        SCOPED_TRACE(testing::Message() << element_name(e) << " hd" << c.head_dim << " rows " << positions.size());
        const Problem p(c, positions, KvElement::f32, 11);
        std::pair<std::vector<int8_t>, std::vector<float>> fused;
        const auto out = p.gpu(e, true, {}, false, &fused);
        EXPECT_TRUE(same_bits(out.data(), p.gpu(e, true).data(), out.size())) << "the output with the quantisation";
        const int64_t rows = static_cast<int64_t>(positions.size());
        std::vector<int8_t> q(out.size());
        std::vector<float> meta(out.size() / 16);
        ASSERT_TRUE(memra::ref::quantize_act_q8(out.data(), rows, p.width(), q.data(), meta.data()));
        EXPECT_EQ(fused.first, q) << "codes";
        EXPECT_TRUE(same_bits(fused.second.data(), meta.data(), meta.size())) << "{d, s} per block";
      }
}

// With fp8 weights the chunk kernel of a one-chunk step also writes the fp8 GEMV's
// prepared rows (a q-head group of whole 128-element groups): exactly
// ref::prepare_act_fp8 of its output, the output unchanged.
TEST(CudaDecodeAttentionEmulated, FusedFp8RowsAreTheReferencePreparationOfTheOutput) {
  for (const KvElement e : {KvElement::f16, KvElement::bf16, KvElement::fp8})
    for (const Config& c : {Config{8, 2, 128, 0, 0.0f}, Config{4, 2, 64, 30, 30.0f}, Config{2, 2, 256, 0, 0.0f}}) {
      SCOPED_TRACE(testing::Message() << element_name(e) << " hd" << c.head_dim);
      const std::vector<int32_t> positions = {0, 5, 63, 40};
      const Problem p(c, positions, KvElement::f32, 13);
      std::pair<std::vector<uint16_t>, std::vector<float>> fused;
      const auto out = p.gpu(e, true, {}, false, nullptr, &fused);
      EXPECT_TRUE(same_bits(out.data(), p.gpu(e, true).data(), out.size())) << "the output with the preparation";
      std::vector<uint16_t> plane(out.size());
      std::vector<float> back(out.size() / 128);
      ASSERT_TRUE(memra::ref::prepare_act_fp8(out.data(), static_cast<int64_t>(positions.size()), p.width(), plane.data(), back.data()));
      EXPECT_EQ(fused.first, plane) << "bf16 plane";
      EXPECT_TRUE(same_bits(fused.second.data(), back.data(), back.size())) << "2^(120 - E) per group";
    }
}

}  // namespace
