// memra-kernel-check --plugin-dir DIR: the kernels quant plugins in DIR register
// (memra_quant_api.register_kernels), run through the backend's matmul op (the kernel
// registry picks them), against the same plugin's CPU matmul: normalised MSE within
// kMatmulBound, and each token row of M = 1..16 and 40 bitwise the row computed alone
// (batch invariance). A plugin whose registration is refused is a FAIL line naming it.
#include <cstring>

#include "core/plugin_host/plugin_host.hpp"
#include "host/backend/plugin_kernels.hpp"
#include "host/tools/memra-kernel-check/checks.hpp"

namespace memra::kcheck {

void check_plugin_kernels(Device& d, Report& r, const CheckOptions& o, const std::vector<std::string>& plugin_dirs) {
  if (plugin_dirs.empty()) return;
  plugins::PluginHostOptions po;
  for (const std::string& dir : plugin_dirs) po.plugin_dirs.emplace_back(dir);
  po.use_env_path = false;
  po.use_install_dir = false;
  plugins::PluginHost host(std::move(po));
  host.discover();
  std::vector<plugins::QuantPlugin> quants;
  for (const plugins::PluginInfo& p : host.plugins())
    if (p.kind == plugins::PluginKind::quant)
      if (auto q = host.quant(p.name); q && MEMRA_STRUCT_HAS(&q->api(), memra_quant_api, register_kernels) && q->api().register_kernels)
        quants.push_back(std::move(*q));
  if (quants.empty()) {
    r.add("plugin kernels: a quant plugin with register_kernels in the plugin dirs", false, "none found");
    return;
  }
  for (const std::string& line : backend::register_plugin_kernels(d.backend(), quants))
    r.add("plugin kernels: registration", false, line);
  const int64_t rows = o.quick ? 72 : 1027, cols = o.quick ? 256 : 4096;
  for (const plugins::QuantPlugin& q : quants) {
    for (const std::string& scheme : q.info().handles) {
      const std::string name = "plugin " + q.info().name + " matmul " + scheme;
      r.guard(name, [&] {
        Rng rng(o.seed);
        const std::vector<float> w = rng.floats(static_cast<size_t>(rows * cols));
        auto bytes = q.weight_bytes(scheme, rows, cols);
        if (!bytes) throw Failure(bytes.error().message);
        std::vector<uint8_t> packed(*bytes);
        if (auto s = q.quantize(scheme, w, rows, cols, std::span<std::byte>(reinterpret_cast<std::byte*>(packed.data()), packed.size())); !s)
          throw Failure(s.error().message);
        std::vector<uint8_t> host_copy = packed;
        const memra_weight* wt = d.weight(name, scheme, MEMRA_DTYPE_BLOCKS, {rows, cols}, std::move(packed));
        bool rows_bitwise = true;
        Comparison worst;
        for (int64_t m : {1, 2, 3, 4, 5, 8, 16, 40}) {
          const std::vector<float> x = rng.floats(static_cast<size_t>(m * cols));
          std::vector<float> ref(static_cast<size_t>(m * rows));
          memra_matmul_args a{};
          a.struct_size = MEMRA_MATMUL_ARGS_STRUCT_SIZE;
          a.scheme = scheme.c_str();
          a.backend = MEMRA_BACKEND_CPU;
          a.weight = host_copy.data();
          a.rows = rows, a.cols = cols, a.m = m;
          a.x = x.data(), a.y = ref.data();
          if (auto s = q.matmul(a); !s) throw Failure("CPU matmul: " + s.error().message);
          d.begin_step();
          memra_tensor xt = d.upload(x, {m, cols}), yt = d.tensor({m, rows});
          d.check(d.ops().matmul(d.ctx(), &xt, wt, nullptr, &yt), "matmul (" + scheme + ")");
          const std::vector<float> y = d.download(yt);
          const Comparison c = compare(y, ref);
          if (c.nmse > worst.nmse) worst.nmse = c.nmse;
          worst.max_abs = std::max(worst.max_abs, c.max_abs);
          worst.bitwise = worst.bitwise && c.bitwise;
          worst.nonfinite_mismatch += c.nonfinite_mismatch;
          // Each token row alone gives the same bits.
          if (m > 1) {
            d.begin_step();
            const std::vector<float> x0(x.end() - cols, x.end());
            memra_tensor x1 = d.upload(x0, {1, cols}), y1 = d.tensor({1, rows});
            d.check(d.ops().matmul(d.ctx(), &x1, wt, nullptr, &y1), "matmul (" + scheme + ", one row)");
            const std::vector<float> alone = d.download(y1);
            rows_bitwise = rows_bitwise && std::memcmp(alone.data(), y.data() + (m - 1) * rows, rows * sizeof(float)) == 0;
          }
        }
        r.nmse(name + " vs its CPU matmul (M=1..40)", worst, kMatmulBound);
        r.add(name + " vs its CPU matmul bitwise", worst.bitwise, worst.bitwise ? "every element" : "differs (within the nmse bound above)");
        r.add(name + " last row of M=2..40 == the row alone (bitwise)", rows_bitwise, "");
      });
    }
  }
}

}  // namespace memra::kcheck
