#include "repack/tool/repack.hpp"

#include "repack/checkpoint/checkpoint_import.hpp"

#include "repack/format/freshness.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "repack/checkpoint/mapped_file.hpp"

#include "repack/format/layout.hpp"
#include "repack/format/gguf_vocab_file.hpp"
#include "repack/format/sha256.hpp"
#include "repack/format/writer.hpp"
#include "repack/quant/fp_convert.hpp"
#include "plugins/quant-common/quantize.hpp"
#include "repack/tool/precision.hpp"
#include "repack/tool/source.hpp"
#include "repack/tool/validate.hpp"
#include <nlohmann/json.hpp>

#ifndef MEMRA_REPACK_VERSION
#define MEMRA_REPACK_VERSION "0.0.0"
#endif

namespace memra::repack {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Elements converted per chunk: bounds the float32 scratch to 32 MiB per worker.
constexpr uint64_t kChunkElements = uint64_t{8} << 20;

struct Shared {
  Shared(const Source& s, const PrecisionPlan& p, format::Writer& w, std::vector<format::TensorEntry>& e, Progress* pr,
         const std::atomic<bool>* c)
      : source(s), plan(p), writer(w), entries(e), progress(pr), cancel(c) {}
  const Source& source;
  const PrecisionPlan& plan;
  format::Writer& writer;
  std::vector<format::TensorEntry>& entries;
  Progress* progress;
  const std::atomic<bool>* cancel;
  const SchemeCatalog* schemes = nullptr;  // the quant plugins that write each scheme
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::optional<Error> error;

  bool stop() const { return failed.load() || (cancel && cancel->load()); }
  void fail(Error e) {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (!error) error = std::move(e);
    failed = true;
  }
  void advance(uint64_t bytes) {
    if (progress) progress->done_bytes += bytes;
  }
};

// Converts a tensor through float32, chunk by chunk (whole rows), into its target scheme.
Status convert_tensor(Shared& sh, const SourceTensor& st, const format::TensorEntry& e, std::string* sha) {
  auto stream = sh.writer.open_tensor(e);
  if (!stream) return stream.error();
  const uint64_t n = element_count(st.shape);
  const uint64_t cols = st.shape.empty() ? 1 : st.shape.back();
  const uint64_t rows_per_chunk = std::max<uint64_t>(1, kChunkElements / std::max<uint64_t>(cols, 1));
  std::vector<float> f32;
  std::vector<uint8_t> out;
  for (uint64_t first = 0; first < n; first += rows_per_chunk * cols) {
    if (sh.stop()) return make_error(ErrorCode::io, "interrupted");
    const uint64_t count = std::min(rows_per_chunk * cols, n - first);
    f32.resize(count);
    MEMRA_TRY(sh.source.to_f32(st, first, count, f32.data()));
    MEMRA_TRY(check_finite(sh.source, st, f32.data(), first, count));
    const void* bytes = f32.data();
    uint64_t nbytes = count * 4;
    if (e.scheme != "f32") {
      // The scheme's quant plugin writes it (memra_quant_api.quantize): float conversions and
      // quantisers alike.
      const auto rows = static_cast<int64_t>(count / cols);
      const auto b = sh.schemes->bytes(e.scheme, {static_cast<uint64_t>(rows), cols});
      if (!b) return make_error(ErrorCode::internal, "tensor '" + st.source_name + "': no quant plugin writes rows of " + std::to_string(cols) +
                                                         " in " + e.scheme);
      out.resize(*b);
      if (auto q = sh.schemes->quantize(e.scheme, std::span<const float>(f32.data(), count), rows, static_cast<int64_t>(cols),
                                        std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()), out.size()));
          !q)
        return make_error(q.error().code, "tensor '" + st.source_name + "', rows from " + std::to_string(first / cols) + ": " + q.error().message);
      bytes = out.data(), nbytes = out.size();
    }
    MEMRA_TRY(stream->write(bytes, nbytes));
    sh.advance(count * st.bytes / std::max<uint64_t>(n, 1));
  }
  auto h = stream->finish();
  if (!h) return h.error();
  *sha = std::move(*h);
  return {};
}

// A weight its quant plugin reads as published, written in its scheme chunk by chunk
// (whole rows; the plugin refuses codes its scheme cannot hold).
Status import_tensor(Shared& sh, const SourceTensor& st, const format::TensorEntry& e, std::string* sha) {
  auto stream = sh.writer.open_tensor(e);
  if (!stream) return stream.error();
  const auto rows = static_cast<int64_t>(st.shape.at(0)), cols = static_cast<int64_t>(st.shape.at(1));
  const int64_t rows_per_chunk = std::max<int64_t>(1, static_cast<int64_t>(kChunkElements) / std::max<int64_t>(cols, 1));
  std::vector<std::byte> out;
  for (int64_t r0 = 0; r0 < rows; r0 += rows_per_chunk) {
    if (sh.stop()) return make_error(ErrorCode::io, "interrupted");
    const int64_t n = std::min(rows_per_chunk, rows - r0);
    const auto b = st.imported->bytes(n);
    if (!b) return make_error(b.error().code, "tensor '" + st.source_name + "': " + b.error().message);
    out.resize(*b);
    if (auto w = st.imported->write_rows(r0, n, out); !w)
      return make_error(ErrorCode::corrupt, "cannot repack " + sh.source.path().string() + ": " + w.error().message);
    MEMRA_TRY(stream->write(out.data(), out.size()));
    sh.advance(st.bytes * static_cast<uint64_t>(n) / static_cast<uint64_t>(rows));
  }
  auto h = stream->finish();
  if (!h) return h.error();
  *sha = std::move(*h);
  return {};
}

void worker(Shared& sh, const std::vector<size_t>& order) {
  for (size_t k = sh.next++; k < order.size() && !sh.stop(); k = sh.next++) {
    const size_t i = order[k];
    const TensorPlan& tp = sh.plan.tensors[i];
    const SourceTensor& st = sh.source.tensors()[tp.source_index];
    format::TensorEntry& e = sh.entries[i];
    std::string sha;
    Status st_ok;
    if (tp.copy && st.imported) {
      st_ok = import_tensor(sh, st, e, &sha);
    } else if (tp.copy) {
      // Copied as stored: its values are checked first (converted chunk by chunk).
      if (auto finite = check_finite(sh.source, st, [&] { return sh.stop(); }); !finite) {
        sh.fail(finite.error());
        return;
      }
      Result<std::string> h = std::string();
      if (st.segments.size() <= 1) {
        h = sh.writer.write_tensor(e, st.data, [&] { return sh.stop(); });
      } else {  // assembled by the family (stacked experts): its segments in order
        auto stream = sh.writer.open_tensor(e);
        Status w = stream ? Status() : Status(stream.error());
        for (size_t k = 0; w && k < st.segments.size(); ++k) {
          if (sh.stop()) w = make_error(ErrorCode::io, "interrupted");
          else w = stream->write(st.segments[k].data, st.segments[k].bytes);
        }
        h = w ? stream->finish() : Result<std::string>(w.error());
      }
      if (h) sha = std::move(*h), sh.advance(st.bytes);
      else st_ok = h.error();
    } else {
      st_ok = convert_tensor(sh, st, e, &sha);
    }
    if (!st_ok) {
      sh.fail(make_error(st_ok.error().code, st_ok.error().message));
      return;
    }
    e.checksum = std::move(sha);
    if (sh.progress) ++sh.progress->tensors_done;
  }
}

std::string dominant_scheme(const Source& s) {
  std::map<std::string, uint64_t> bytes;
  for (const SourceTensor& t : s.tensors())
    if (t.shape.size() >= 2) bytes[t.scheme] += t.bytes;
  std::string best;
  uint64_t most = 0;
  for (const auto& [k, v] : bytes)
    if (v > most) most = v, best = k;
  return best;
}

}  // namespace

std::string tool_version() { return std::string(kToolName) + " " + MEMRA_REPACK_VERSION; }

std::string content_options_json(const RepackOptions& o) {
  nlohmann::ordered_json j;
  j["quant"] = o.quant;
  nlohmann::ordered_json ov = nlohmann::ordered_json::array();
  for (const SchemeOverride& x : o.overrides) ov.push_back(x.pattern + "=" + x.scheme);
  j["tensor_scheme"] = ov;
  j["format_version"] = format::kFormatVersion;
  return j.dump();
}

std::string content_key(const std::string& source_sha256, const RepackOptions& o) {
  const std::string text = source_sha256 + "\n" + content_options_json(o);
  return format::sha256_hex(text.data(), text.size()).substr(0, 16);
}

std::string combined_digest(const std::vector<format::SourceFile>& files) {
  if (files.size() == 1) return files[0].sha256;
  std::vector<format::SourceFile> sorted = files;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  std::string lines;
  for (const auto& f : sorted) lines += f.sha256 + "  " + f.path + "\n";
  return format::sha256_hex(lines.data(), lines.size());
}

Result<RepackResult> repack_checkpoint(const RepackOptions& o) {
  const auto t0 = Clock::now();
  Progress local;
  Progress* progress = o.progress ? o.progress : &local;
  progress->phase = 0;

  // 1. Validate everything that can be checked before writing.
  if (!o.plugins) return make_error(ErrorCode::invalid_argument, "repack: no plugin host (RepackOptions::plugins)");
  auto source = Source::open(o.source, *o.plugins);
  if (!source) return source.error();
  const Source& src = **source;
  std::map<std::string, std::string> keep_as_stored;  // the family's (MoE routers, ...)
  MEMRA_TRY(validate_source(src, *o.plugins, &keep_as_stored));
  // Every scheme is written by the quant plugin that owns it.
  auto schemes = SchemeCatalog::from_plugins(*o.plugins);
  if (!schemes) return schemes.error();
  auto plan = plan_precision(src, o.quant, *schemes, o.overrides, keep_as_stored);
  if (!plan) return plan.error();
  std::vector<format::TensorEntry> entries;
  uint64_t total_tensor_bytes = 0, source_bytes = 0, parameters = 0;
  for (const TensorPlan& tp : plan->tensors) {
    const SourceTensor& st = src.tensors()[tp.source_index];
    format::TensorEntry e;
    e.name = st.name;
    e.source_name = st.source_name;
    e.shape = st.shape;
    e.scheme = tp.scheme;
    e.layout = e.scheme == "fp8" ? quant::kFp8LayoutVersion : 1;
    e.source_scheme = st.scheme;
    // Carried tensors keep the layout they are stored in; converted ones take their plugin's.
    const auto b = tp.copy && !st.imported ? format::tensor_bytes(e.scheme, e.layout, e.shape) : schemes->bytes(e.scheme, e.shape);
    if (!b) return make_error(ErrorCode::internal, "no layout for tensor '" + e.name + "' as " + e.scheme);
    e.bytes = *b;
    entries.push_back(std::move(e));
    total_tensor_bytes += st.bytes;
    parameters += element_count(st.shape);
  }
  std::vector<std::pair<fs::path, uint64_t>> weight_files;
  for (const fs::path& f : src.weight_files()) {
    std::error_code ec;
    const uint64_t size = fs::file_size(f, ec);
    if (ec) return make_error(ErrorCode::io, "cannot stat " + f.string() + ": " + ec.message());
    weight_files.push_back({f, size});
    source_bytes += size;
  }
  progress->total_bytes = source_bytes + total_tensor_bytes;
  progress->tensors_total = entries.size();
  const double validate_s = seconds_since(t0);

  // 2. Write into a temporary directory next to the destination.
  const auto t1 = Clock::now();
  progress->phase = 1;
  format::WriterOptions wo;
  wo.fsync = o.fsync;
  wo.overwrite = o.overwrite;
  wo.fault = o.fault;
  wo.name_at_commit = o.name_by_content;
  const std::string stem = o.name_stem.empty() ? std::string("model") : o.name_stem;
  auto writer = format::Writer::create(o.name_by_content ? o.output / (stem + ".memra") : o.output, wo);
  if (!writer) return writer.error();
  format::Writer& w = **writer;
  MEMRA_TRY(w.layout(entries));

  // The source digest, read alongside the tensor writes (its own thread).
  std::vector<format::SourceFile> digests(weight_files.size());
  std::optional<Error> hash_error;
  Shared sh(src, *plan, w, entries, progress, o.cancel);
  sh.schemes = &*schemes;
  const auto stop_hashing = [&] { return sh.stop(); };  // cancelled, or a worker failed
  std::thread hasher([&] {
    for (size_t i = 0; i < weight_files.size(); ++i) {
      if (stop_hashing()) return;
      const auto& [path, size] = weight_files[i];
      const int64_t mtime_ns = format::file_mtime_ns(path);  // before reading: a later write shows as stale
      auto map = MappedFile::open(path.string());
      if (!map) {
        hash_error = map.error();
        return;
      }
      if ((*map)->size() != size) {
        hash_error = make_error(ErrorCode::conflict, path.string() + " changed while it was being repacked; run memra-repack again");
        return;
      }
      format::Sha256 h;
      const uint8_t* p = (*map)->data();
      constexpr size_t kPiece = size_t{16} << 20;
      for (size_t done = 0; done < (*map)->size(); done += kPiece) {
        if (stop_hashing()) return;
        const size_t n = std::min(kPiece, (*map)->size() - done);
        h.update(p + done, n);
        progress->done_bytes += n;
      }
      const fs::path rel = src.format() == "gguf" ? path.filename() : path.lexically_relative(src.path());
      digests[i] = {rel.string(), size, h.finish_hex(), mtime_ns};
    }
  });

  // Largest tensors first, so the workers finish together.
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return entries[a].bytes > entries[b].bytes; });
  const int n_threads = std::max(1, o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int k = 1; k < std::min<int>(n_threads, static_cast<int>(order.size())); ++k) pool.emplace_back([&] { worker(sh, order); });
  worker(sh, order);
  for (auto& t : pool) t.join();
  hasher.join();
  if (sh.error) return *sh.error;  // the Writer's destructor removes the temporary directory
  if (o.cancel && o.cancel->load()) return make_error(ErrorCode::io, "interrupted; nothing was written to " + o.output.string());
  if (hash_error) return *hash_error;

  // 3. Side files, manifest, commit.
  const auto t2 = Clock::now();
  progress->phase = 2;
  format::Manifest m;
  m.created_by = tool_version();
  m.created_at = format::utc_now_iso8601();
  m.source.path = src.path().string();
  m.source.format = src.format();
  m.source.files = digests;
  m.source.sha256 = combined_digest(digests);
  m.source.size = source_bytes;
  m.config_json = model_config_to_json(src.config());
  for (const auto& [from, name] : src.side_files()) {
    const int64_t mtime_ns = format::file_mtime_ns(from);
    auto sha = format::sha256_file(from.string());
    if (!sha) return sha.error();
    std::error_code ec;
    m.source.files.push_back({from.filename().string(), fs::file_size(from, ec), *sha, mtime_ns});
    MEMRA_TRY(w.copy_file(from, name));
    if (name.rfind("source/", 0) != 0) m.tokenizer.files.push_back(name);
  }
  if (src.format() == "gguf") {
    if (src.gguf_tokenizer()) {
      MEMRA_TRY(w.write_file(format::kGgufTokenizerFile, format::gguf_tokenizer_to_json(*src.gguf_tokenizer())));
      m.tokenizer.kind = "gguf";
      m.tokenizer.files.push_back(std::string(format::kGgufTokenizerFile));
    } else {
      m.tokenizer.kind = "none";
    }
  } else {
    m.tokenizer.kind = m.tokenizer.files.empty() ? "none" : "hf";
  }
  if (!src.chat_template().empty()) {
    MEMRA_TRY(w.write_file("chat_template.jinja", src.chat_template()));
    m.tokenizer.chat_template_file = "chat_template.jinja";
  }
  m.precision = plan->precision;
  m.tensors = entries;
  RepackResult r;
  Result<std::string> manifest_sha = std::string();
  if (o.name_by_content) {
    const std::filesystem::path named = o.output / (stem + "-" + content_key(m.source.sha256, o) + ".memra");
    manifest_sha = w.commit(m, named);
    if (!manifest_sha && manifest_sha.error().code == ErrorCode::conflict) {
      // The same checkpoint repacked the same way is there already (another path to the
      // same bytes, or a run whose registry record was lost): the caller verifies it.
      w.abort();
      r.output = named;
      r.existing = true;
      manifest_sha = std::string();
    }
  } else {
    manifest_sha = w.commit(m);
  }
  if (!manifest_sha) return manifest_sha.error();
  progress->phase = 3;

  if (!r.existing) r.output = w.destination();
  r.manifest_sha256 = *manifest_sha;
  r.manifest = std::move(m);
  r.config = src.config();
  r.source_quant = dominant_scheme(src);
  r.parameters = parameters;
  r.validate_seconds = validate_s;
  r.write_seconds = std::chrono::duration<double>(t2 - t1).count();
  r.commit_seconds = seconds_since(t2);
  return r;
}

}  // namespace memra::repack
