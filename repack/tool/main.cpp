// memra-repack — turns a Hugging Face safetensors directory or a .gguf file into a .memra
// directory (docs/FORMAT.md), optionally quantizing, and records its provenance in the
// registry.
//
//   memra-repack SRC -o DST [--quant SCHEME] [--registry PATH | --no-registry] [--threads N] [--force]
//   memra-repack --bench [--bench-gguf FILE] [--bench-safetensors DIR] [--bench-size MB]
//
// Exit codes: 0 done, 1 failed (nothing left under DST), 2 usage error, 130 interrupted.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "registry/registry.hpp"
#include "repack/tool/bench.hpp"
#include "repack/tool/fault_hook.hpp"
#include "repack/tool/precision.hpp"
#include "repack/tool/scheme_catalog.hpp"
#include "repack/tool/progress.hpp"
#include "repack/tool/provenance.hpp"
#include "repack/tool/repack.hpp"

namespace {

using namespace memra;

constexpr const char* kUsage = R"(usage: memra-repack SRC -o DST [options]
       memra-repack --bench [bench options]

Repacks a model into memra's .memra directory format (docs/FORMAT.md): a manifest,
256-byte-aligned weight blobs that load by mmap, the tokenizer and chat template. The
output is written to a temporary directory next to DST and renamed into place only when
complete; on any failure nothing is left under DST. The source checkpoint and the repack
are recorded in the registry once DST is in place.

  SRC                     a Hugging Face model directory (config.json + *.safetensors)
                          or a .gguf file
  -o, --output DST        the .memra directory to create (its parent must exist)

options:
  -q, --quant SCHEME      keep (default): every tensor as stored (GGUF blocks bit-exact);
                          or a scheme of an installed quant plugin (listed below): convert
                          (bf16, f16) or quantize the matrices on the CPU with its plugin
                          (the head, attn_v and a few others may get more bits, as its
                          plugin says; the manifest lists every choice); an unknown one
                          is refused with the list
  -t, --tensor-scheme PATTERN=SCHEME
                          write the tensors whose canonical name matches the glob
                          PATTERN (e.g. 'blk.*.ffn_down.weight') in SCHEME (a scheme of
                          an installed quant plugin); repeatable, first match wins
  --registry PATH         registry database to record in (default: $MEMRA_REGISTRY, else
                          $MEMRA_HOME/registry.db, else ~/.memra/registry.db)
  --no-registry           do not record anything
  --plugin-dir DIR        also look for plugins in DIR (repeatable; then $MEMRA_PLUGIN_PATH
                          and <prefix>/lib/memra/plugins): the family plugin serving SRC's
                          architecture reads its config and names its tensors
  -j, --threads N         tensor worker threads (default: all cores)
  -f, --force             replace DST if it exists (atomically)
  --quiet                 no progress output
  -h, --help              this help
  --version               print the version

bench options (throughput of --quant keep and of validation, from the page cache):
  --bench                 run the benchmark instead of a repack
  --bench-gguf FILE       GGUF to repack (default: a synthetic Q4_K llama)
  --bench-safetensors DIR safetensors checkpoint to validate (default: a synthetic bf16 llama)
  --bench-size MB         size of the synthetic checkpoints (default 1024)
  --bench-dir DIR         where synthetic inputs and outputs go (default: a temp dir)
  --bench-repeats N       best of N runs (default 3)

exit status: 0 done, 1 failed, 2 usage error, 130 interrupted
)";

std::atomic<bool> g_cancel{false};

void on_signal(int) { g_cancel = true; }

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "memra-repack: %s\n(see memra-repack --help)\n", msg.c_str());
  return 2;
}

bool parse_int(const std::string& s, int64_t lo, int64_t hi, int64_t* out) {
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> positional;
  repack::RepackOptions o;
  std::optional<std::string> registry_path;
  bool no_registry = false, quiet = false, bench = false;
  repack::BenchOptions bo;
  std::vector<std::filesystem::path> plugin_dirs;
  bool help = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) -> bool {
      const size_t eq = a.find('=');
      if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
        *out = a.substr(eq + 1);
        return true;
      }
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    const std::string key = a.rfind("--", 0) == 0 ? a.substr(0, a.find('=')) : a;
    std::string v;
    int64_t n = 0;
    if (key == "-h" || key == "--help") {
      help = true;  // printed once the plugins (and so the schemes) are known
    } else if (key == "--version") {
      std::printf("%s\n", repack::tool_version().c_str());
      return 0;
    } else if (key == "-o" || key == "--output") {
      if (!value(&v) || v.empty()) return usage_error(key + " needs a directory");
      o.output = v;
    } else if (key == "-q" || key == "--quant") {
      if (!value(&v)) return usage_error(key + " needs a scheme");
      o.quant = v;  // checked against the quant plugins' schemes once they are loaded
    } else if (key == "-t" || key == "--tensor-scheme") {
      if (!value(&v)) return usage_error(key + " needs PATTERN=SCHEME");
      const size_t eq = v.rfind('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) return usage_error(key + " '" + v + "': give PATTERN=SCHEME");
      o.overrides.push_back({v.substr(0, eq), v.substr(eq + 1)});
    } else if (key == "--registry") {
      if (!value(&v) || v.empty()) return usage_error("--registry needs a path");
      registry_path = v;
    } else if (key == "--no-registry") {
      no_registry = true;
    } else if (key == "--plugin-dir") {
      if (!value(&v) || v.empty()) return usage_error("--plugin-dir needs a directory");
      plugin_dirs.emplace_back(v);
    } else if (key == "-j" || key == "--threads") {
      if (!value(&v) || !parse_int(v, 1, 1024, &n)) return usage_error(key + " needs a number from 1 to 1024");
      o.threads = static_cast<int>(n);
      bo.threads = o.threads;
    } else if (key == "-f" || key == "--force") {
      o.overwrite = true;
    } else if (key == "--quiet") {
      quiet = true;
    } else if (key == "--bench") {
      bench = true;
    } else if (key == "--bench-gguf") {
      if (!value(&v)) return usage_error("--bench-gguf needs a file");
      bo.gguf = v;
    } else if (key == "--bench-safetensors") {
      if (!value(&v)) return usage_error("--bench-safetensors needs a directory");
      bo.safetensors = v;
    } else if (key == "--bench-dir") {
      if (!value(&v) || v.empty()) return usage_error("--bench-dir needs a directory");
      bo.work_dir = v;
    } else if (key == "--bench-size") {
      if (!value(&v) || !parse_int(v, 16, 1 << 20, &n)) return usage_error("--bench-size needs megabytes (16 or more)");
      bo.size_mb = static_cast<uint64_t>(n);
    } else if (key == "--bench-repeats") {
      if (!value(&v) || !parse_int(v, 1, 100, &n)) return usage_error("--bench-repeats needs a number from 1 to 100");
      bo.repeats = static_cast<int>(n);
    } else if (a.size() > 1 && a[0] == '-') {
      return usage_error("unknown option '" + a + "'");
    } else {
      positional.push_back(a);
    }
  }
  plugins::PluginHostOptions po;
  po.plugin_dirs = plugin_dirs;
  po.services.log = [quiet](memra_log_level level, std::string_view line) {
    if (level >= MEMRA_LOG_WARN && !quiet) std::fprintf(stderr, "memra-repack: %.*s\n", static_cast<int>(line.size()), line.data());
  };
  plugins::PluginHost plugin_host(std::move(po));
  plugin_host.discover();
  o.plugins = &plugin_host;
  bo.plugins = &plugin_host;
  // The schemes the installed quant plugins write (memra_scheme_info.repack).
  auto catalog = repack::SchemeCatalog::from_plugins(plugin_host);
  if (!catalog) return usage_error(catalog.error().message);
  const std::vector<std::string> targets = catalog->quant_targets(), tensor_schemes = catalog->tensor_schemes();
  if (help) {
    std::fputs(kUsage, stdout);
    std::printf("\nschemes of the installed quant plugins:\n  --quant          %s\n  --tensor-scheme  %s\n",
                repack::join_or(targets).c_str(), repack::join_or(tensor_schemes).c_str());
    return 0;
  }
  if (std::find(targets.begin(), targets.end(), o.quant) == targets.end())
    return usage_error("unknown --quant '" + o.quant + "'; choose " + repack::join_or(targets));
  for (const repack::SchemeOverride& ov : o.overrides)
    if (std::find(tensor_schemes.begin(), tensor_schemes.end(), ov.scheme) == tensor_schemes.end())
      return usage_error("--tensor-scheme '" + ov.pattern + "=" + ov.scheme + "': give PATTERN=SCHEME with SCHEME one of " +
                         repack::join_or(tensor_schemes));
  if (bench) {
    if (!positional.empty()) return usage_error("--bench takes no SRC (use --bench-gguf / --bench-safetensors)");
    return repack::run_bench(bo);
  }
  if (positional.empty()) return usage_error("missing SRC");
  if (positional.size() > 1) return usage_error("one SRC only (got '" + positional[0] + "' and '" + positional[1] + "')");
  if (o.output.empty()) return usage_error("missing -o DST");
  if (registry_path && no_registry) return usage_error("--registry and --no-registry contradict each other");
  o.source = positional[0];

  std::filesystem::path reg;
  if (!no_registry) {
    if (registry_path) {
      reg = *registry_path;
    } else {
      auto d = registry::default_path();
      if (!d) return usage_error("no registry path: " + d.error().message + " (pass --registry PATH or --no-registry)");
      reg = *d;
    }
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);

  repack::Progress progress;
  o.progress = &progress;
  o.cancel = &g_cancel;
  o.fault = repack::fault_from_env(&g_cancel);
  if (!quiet) std::fprintf(stderr, "memra-repack: %s -> %s (--quant %s)\n", o.source.c_str(), o.output.c_str(), o.quant.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  repack::ProgressPrinter printer(progress, quiet);
  auto r = repack::repack_checkpoint(o);
  printer.stop();
  if (!r) {
    if (g_cancel.load()) {
      std::fprintf(stderr, "memra-repack: interrupted; nothing was written to %s\n", o.output.c_str());
      return 130;
    }
    std::fprintf(stderr, "memra-repack: %s\n", r.error().message.c_str());
    return 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t out_bytes = 0;
  for (const auto& b : r->manifest.blobs) out_bytes += b.size;
  if (!quiet)
    std::fprintf(stderr, "memra-repack: wrote %s: %zu tensors, %s of weights, in %.2f s (%s/s of source)\n",
                 r->output.c_str(), r->manifest.tensors.size(), repack::human_bytes(static_cast<double>(out_bytes)).c_str(), secs,
                 repack::human_bytes(static_cast<double>(r->manifest.source.size) / secs).c_str());
  std::printf("output %s\nsource sha256 %s\nmanifest sha256 %s\n", r->output.c_str(), r->manifest.source.sha256.c_str(),
              r->manifest_sha256.c_str());
  if (!no_registry) {
    auto ids = repack::record_provenance(reg, *r, o);
    if (!ids) {
      std::fprintf(stderr, "memra-repack: %s is complete, but recording it in the registry failed: %s\n", r->output.c_str(),
                   ids.error().message.c_str());
      return 1;
    }
    std::printf("registry %s: checkpoint %lld, repack %lld\n", reg.c_str(), static_cast<long long>(ids->checkpoint_id),
                static_cast<long long>(ids->repack_id));
  }
  return 0;
}
