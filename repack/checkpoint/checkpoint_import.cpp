#include "repack/checkpoint/checkpoint_import.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>

namespace memra {

namespace {

memra_checkpoint_tensor view(const StoredForm& f) {
  memra_checkpoint_tensor t{};
  t.struct_size = MEMRA_CHECKPOINT_TENSOR_STRUCT_SIZE;
  t.name = f.name.c_str();
  t.dtype = f.dtype.c_str();
  t.ndim = static_cast<int32_t>(std::min<size_t>(f.shape.size(), 8));
  for (int32_t i = 0; i < t.ndim; ++i) t.shape[i] = static_cast<int64_t>(f.shape[static_cast<size_t>(i)]);
  t.data = f.data;
  t.bytes = f.bytes;
  return t;
}

memra_import_args import_args(const memra_checkpoint_tensor& weight, std::span<const memra_checkpoint_tensor> siblings) {
  memra_import_args a{};
  a.struct_size = MEMRA_IMPORT_ARGS_STRUCT_SIZE;
  a.weight = &weight;
  a.siblings = siblings.data();
  a.sibling_count = siblings.size();
  return a;
}

bool float_dtype(const std::string& d) { return d == "F32" || d == "F16" || d == "BF16" || d == "F64"; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

ImportedWeight::ImportedWeight(plugins::QuantPlugin plugin, const StoredForm& weight, std::vector<StoredForm> siblings,
                               std::string scheme, int64_t rows, int64_t cols)
    : plugin_(std::move(plugin)), scheme_(std::move(scheme)), rows_(rows), cols_(cols) {
  forms_.reserve(siblings.size() + 1);
  forms_.push_back(weight);
  for (StoredForm& s : siblings) forms_.push_back(std::move(s));
  weight_ = view(forms_[0]);
  for (size_t i = 1; i < forms_.size(); ++i) siblings_.push_back(view(forms_[i]));
}

const std::string& ImportedWeight::plugin() const { return plugin_.info().name; }

Result<uint64_t> ImportedWeight::bytes(int64_t rows) const { return plugin_.weight_bytes(scheme_, rows, cols_); }

Status ImportedWeight::write_rows(int64_t row0, int64_t rows, std::span<std::byte> dst) const {
  memra_import_args a = import_args(weight_, siblings_);
  a.row0 = row0, a.row_count = rows, a.dst = dst.data(), a.dst_bytes = dst.size();
  if (plugin_.api().import_tensor(plugin_.ctx(), &a) != MEMRA_OK)
    return make_error(ErrorCode::corrupt, "quant plugin '" + plugin() + "': " + plugin_.last_error());
  return {};
}

Status ImportedWeight::rows_to_f32(int64_t row0, int64_t rows, float* dst) const {
  auto b = bytes(rows);
  if (!b) return b.error();
  std::vector<std::byte> tmp(*b);
  MEMRA_TRY(write_rows(row0, rows, tmp));
  return plugin_.dequantize(scheme_, tmp, rows, cols_, std::span<float>(dst, static_cast<size_t>(rows * cols_)));
}

Result<ImportPlan> plan_imports(const std::vector<StoredForm>& tensors, const plugins::PluginHost& host) {
  ImportPlan plan;
  plan.imported.resize(tensors.size());
  plan.consumed.assign(tensors.size(), false);
  // The quant plugins that read checkpoint forms, in load order.
  std::vector<plugins::QuantPlugin> readers;
  for (const plugins::PluginInfo& p : host.plugins()) {
    if (p.kind != plugins::PluginKind::quant) continue;
    auto q = host.quant(p.name);
    if (q && MEMRA_STRUCT_HAS(&q->api(), memra_quant_api, import_tensor) && q->api().import_tensor) readers.push_back(std::move(*q));
  }
  // Tensors by the module prefix they sit under ("a.b.c" -> "a.b.").
  std::map<std::string, std::vector<size_t>> by_prefix;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const size_t dot = tensors[i].name.rfind('.');
    by_prefix[dot == std::string::npos ? std::string() : tensors[i].name.substr(0, dot + 1)].push_back(i);
  }
  for (const auto& [prefix, members] : by_prefix) {
    for (size_t wi : members) {
      const StoredForm& w = tensors[wi];
      if (!ends_with(w.name, ".weight") || w.name.size() != prefix.size() + 6) continue;
      std::vector<size_t> sib;
      for (size_t j : members)
        if (j != wi && tensors[j].name != prefix + "bias") sib.push_back(j);
      if (sib.empty() && (float_dtype(w.dtype) || w.dtype == "F8_E4M3")) continue;  // plain values
      if (sib.size() > 64) return make_error(ErrorCode::unsupported, "tensor '" + w.name + "' has more than 64 tensors beside it");
      std::vector<StoredForm> forms;
      for (size_t j : sib) forms.push_back(tensors[j]);
      std::vector<memra_checkpoint_tensor> views;
      const memra_checkpoint_tensor wv = view(w);
      for (const StoredForm& f : forms) views.push_back(view(f));
      bool read = false;
      for (const plugins::QuantPlugin& q : readers) {
        memra_import_args a = import_args(wv, views);
        const memra_status st = q.api().import_tensor(q.ctx(), &a);
        if (st == MEMRA_ERR_UNSUPPORTED) continue;
        if (st != MEMRA_OK)
          return make_error(ErrorCode::corrupt, "quant plugin '" + q.info().name + "' refuses tensor '" + w.name + "': " + q.last_error());
        const std::string scheme(a.scheme, strnlen(a.scheme, sizeof(a.scheme)));
        if (std::find(q.info().handles.begin(), q.info().handles.end(), scheme) == q.info().handles.end() || a.rows <= 0 || a.cols <= 0)
          return make_error(ErrorCode::internal, "quant plugin '" + q.info().name + "' read tensor '" + w.name + "' as '" + scheme +
                                                     "', which is not a scheme it serves (or gave no shape)");
        for (size_t k = 0; k < sib.size(); ++k)
          if ((a.used >> k) & 1u) plan.consumed[sib[k]] = true;
        plan.imported[wi] = std::make_shared<const ImportedWeight>(q, w, std::move(forms), scheme, a.rows, a.cols);
        read = true;
        break;
      }
      if (!read && !float_dtype(w.dtype))
        return make_error(ErrorCode::unsupported, "tensor '" + w.name + "' is " + w.dtype +
                                                      (sib.empty() ? std::string() : " with '" + tensors[sib[0]].name + "' beside it") +
                                                      ", a form no installed quant plugin reads");
    }
  }
  return plan;
}

Result<SafetensorsTensors> safetensors_tensors(const safetensors::Checkpoint& checkpoint, const plugins::PluginHost& plugins) {
  SafetensorsTensors out;
  const auto& views = checkpoint.tensors();
  std::vector<StoredForm> forms;
  for (const safetensors::TensorView& t : views) forms.push_back({t.name, safetensors::dtype_name(t.dtype), t.shape, t.data, t.nbytes});
  auto imports = plan_imports(forms, plugins);
  if (!imports) return imports.error();
  out.imports = std::move(*imports);
  for (size_t i = 0; i < views.size(); ++i) {
    const safetensors::TensorView& t = views[i];
    if (out.imports.consumed[i]) continue;
    out.from.push_back(i);
    if (const auto& im = out.imports.imported[i]) {
      auto bytes = im->bytes(im->rows());
      if (!bytes) return make_error(bytes.error().code, "tensor '" + t.name + "': " + bytes.error().message);
      out.stored.push_back({t.name, {static_cast<uint64_t>(im->rows()), static_cast<uint64_t>(im->cols())}, im->scheme(), t.data, *bytes});
    } else {
      std::string scheme = safetensors::dtype_name(t.dtype);
      for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.stored.push_back({t.name, t.shape, std::move(scheme), t.data, t.nbytes});
    }
  }
  return out;
}

}  // namespace memra
