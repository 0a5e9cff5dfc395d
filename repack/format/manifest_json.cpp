// manifest.json <-> Manifest. The only translation unit of the format that parses JSON
// besides the GGUF vocabulary file.
#include <nlohmann/json.hpp>

#include "repack/format/manifest.hpp"

namespace memra::format {
namespace {

using json = nlohmann::ordered_json;

Error bad(const std::string& what) {
  return make_error(ErrorCode::corrupt, "manifest.json: " + what + "; the directory is damaged or not a .memra repack (repack the model with memra-repack)");
}

// Typed field access with errors naming the field.
struct Obj {
  const json& j;
  std::string where;

  Result<const json*> field(const char* k, json::value_t type, bool required = true) const {
    auto it = j.find(k);
    if (it == j.end() || it->is_null()) {
      if (!required) return static_cast<const json*>(nullptr);
      return bad(where + "'" + k + "' is missing");
    }
    const bool ok = type == json::value_t::number_unsigned ? it->is_number_unsigned()
                    : type == json::value_t::number_integer ? it->is_number_integer()
                                                             : it->type() == type;
    if (!ok) return bad(where + "'" + k + "' has the wrong type");
    return &*it;
  }
  Result<std::string> str(const char* k, bool required = true) const {
    auto f = field(k, json::value_t::string, required);
    if (!f) return f.error();
    return *f ? (*f)->get<std::string>() : std::string();
  }
  Result<uint64_t> u64(const char* k) const {
    auto f = field(k, json::value_t::number_unsigned);
    if (!f) return f.error();
    return (*f)->get<uint64_t>();
  }
};

#define MF_GET(var, expr)       \
  auto var##_r = (expr);        \
  if (!var##_r) return var##_r.error(); \
  auto var = std::move(*var##_r)

json source_json(const SourceInfo& s) {
  json files = json::array();
  for (const SourceFile& f : s.files) {
    json j = {{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}};
    if (f.mtime_ns != 0) j["mtime_ns"] = f.mtime_ns;
    files.push_back(std::move(j));
  }
  return {{"path", s.path}, {"format", s.format}, {"sha256", s.sha256}, {"size", s.size}, {"files", files}};
}

json tensor_json(const TensorEntry& t) {
  return {{"name", t.name},     {"source_name", t.source_name}, {"shape", t.shape},   {"scheme", t.scheme},
          {"layout", t.layout}, {"source_scheme", t.source_scheme}, {"blob", t.blob}, {"offset", t.offset},
          {"bytes", t.bytes},   {"crc32c", t.checksum}};
}

Result<TensorEntry> tensor_from(const json& j, size_t i) {
  if (!j.is_object()) return bad("tensors[" + std::to_string(i) + "] is not an object");
  const Obj o{j, "tensors[" + std::to_string(i) + "]: "};
  TensorEntry t;
  MF_GET(name, o.str("name"));
  t.name = name;
  const Obj named{j, "tensor '" + t.name + "': "};
  MF_GET(source_name, named.str("source_name", false));
  t.source_name = source_name.empty() ? t.name : source_name;
  MF_GET(shape, named.field("shape", json::value_t::array));
  for (const json& d : *shape) {
    if (!d.is_number_unsigned()) return bad(named.where + "'shape' must hold non-negative integers");
    t.shape.push_back(d.get<uint64_t>());
  }
  MF_GET(scheme, named.str("scheme"));
  t.scheme = scheme;
  MF_GET(layout, named.u64("layout"));
  if (layout > 0xffffffffu) return bad(named.where + "'layout' is out of range");
  t.layout = static_cast<uint32_t>(layout);
  MF_GET(source_scheme, named.str("source_scheme", false));
  t.source_scheme = source_scheme;
  MF_GET(blob, named.u64("blob"));
  if (blob > 0xffffffffu) return bad(named.where + "'blob' is out of range");
  t.blob = static_cast<uint32_t>(blob);
  MF_GET(offset, named.u64("offset"));
  t.offset = offset;
  MF_GET(bytes, named.u64("bytes"));
  t.bytes = bytes;
  MF_GET(crc, named.str("crc32c"));
  t.checksum = crc;
  return t;
}

}  // namespace

std::string manifest_to_json(const Manifest& m) {
  json j;
  j["format"] = m.format;
  j["version"] = m.version;
  j["created_by"] = m.created_by;
  j["created_at"] = m.created_at;
  j["source"] = source_json(m.source);
  j["config"] = m.config_json.empty() ? json::object() : json::parse(m.config_json, nullptr, false);
  json tok = {{"kind", m.tokenizer.kind}, {"files", m.tokenizer.files}};
  tok["chat_template"] = m.tokenizer.chat_template_file.empty() ? json(nullptr) : json(m.tokenizer.chat_template_file);
  j["tokenizer"] = tok;
  json rules = json::array();
  for (const PrecisionRule& r : m.precision.rules) rules.push_back({{"tensors", r.tensors}, {"scheme", r.scheme}, {"reason", r.reason}});
  j["precision"] = {{"requested", m.precision.requested}, {"rules", rules}};
  j["alignment"] = m.alignment;
  j["checksum"] = m.checksum;
  json blobs = json::array();
  for (const BlobInfo& b : m.blobs) blobs.push_back({{"file", b.file}, {"size", b.size}});
  j["blobs"] = blobs;
  json tensors = json::array();
  for (const TensorEntry& t : m.tensors) tensors.push_back(tensor_json(t));
  j["tensors"] = tensors;
  // Tensor names and paths are UTF-8 from the source; replace rather than throw on bad bytes.
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<Manifest> manifest_from_json(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  const Obj o{j, ""};
  Manifest m;
  MF_GET(format, o.str("format"));
  if (format != kFormatName) return bad("'format' is '" + format + "', expected 'memra'");
  MF_GET(version, o.field("version", json::value_t::number_unsigned));
  const auto v = version->get<uint64_t>();
  if (v == 0 || v > static_cast<uint64_t>(kFormatVersion))
    return make_error(ErrorCode::unsupported, "manifest.json has format version " + std::to_string(v) + "; this memra reads version " +
                                                  std::to_string(kFormatVersion) + " (upgrade memra, or repack the model with this memra-repack)");
  m.version = static_cast<int>(v);
  MF_GET(created_by, o.str("created_by", false));
  m.created_by = created_by;
  MF_GET(created_at, o.str("created_at", false));
  m.created_at = created_at;

  MF_GET(src, o.field("source", json::value_t::object));
  const Obj so{*src, "source: "};
  MF_GET(spath, so.str("path"));
  m.source.path = spath;
  MF_GET(sformat, so.str("format"));
  m.source.format = sformat;
  MF_GET(ssha, so.str("sha256"));
  m.source.sha256 = ssha;
  MF_GET(ssize, so.u64("size"));
  m.source.size = ssize;
  if (auto it = src->find("files"); it != src->end() && it->is_array())
    for (const json& f : *it) {
      if (!f.is_object()) return bad("source: 'files' must hold objects");
      const Obj fo{f, "source file: "};
      MF_GET(fp, fo.str("path"));
      MF_GET(fs, fo.u64("size"));
      MF_GET(fh, fo.str("sha256"));
      int64_t mtime_ns = 0;
      if (auto mt = f.find("mtime_ns"); mt != f.end()) {
        if (!mt->is_number_integer()) return bad("source file: 'mtime_ns' must be an integer");
        mtime_ns = mt->get<int64_t>();
      }
      m.source.files.push_back({fp, fs, fh, mtime_ns});
    }

  MF_GET(config, o.field("config", json::value_t::object));
  m.config_json = config->dump(-1, ' ', false, json::error_handler_t::replace);

  MF_GET(tok, o.field("tokenizer", json::value_t::object));
  const Obj to{*tok, "tokenizer: "};
  MF_GET(kind, to.str("kind"));
  m.tokenizer.kind = kind;
  MF_GET(tfiles, to.field("files", json::value_t::array));
  for (const json& f : *tfiles) {
    if (!f.is_string()) return bad("tokenizer: 'files' must hold strings");
    m.tokenizer.files.push_back(f.get<std::string>());
  }
  MF_GET(tpl, to.str("chat_template", false));
  m.tokenizer.chat_template_file = tpl;

  if (auto it = j.find("precision"); it != j.end() && it->is_object()) {
    const Obj po{*it, "precision: "};
    MF_GET(req, po.str("requested", false));
    m.precision.requested = req;
    if (auto r = it->find("rules"); r != it->end() && r->is_array())
      for (const json& rule : *r) {
        if (!rule.is_object()) return bad("precision: 'rules' must hold objects");
        const Obj ro{rule, "precision rule: "};
        MF_GET(rt, ro.str("tensors"));
        MF_GET(rs, ro.str("scheme"));
        MF_GET(rr, ro.str("reason", false));
        m.precision.rules.push_back({rt, rs, rr});
      }
  }

  MF_GET(alignment, o.u64("alignment"));
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) return bad("'alignment' must be a power of two");
  m.alignment = alignment;
  MF_GET(checksum, o.str("checksum"));
  if (checksum != kChecksumAlgorithm) return bad("'checksum' is '" + checksum + "'; only crc32c is defined");
  m.checksum = checksum;

  MF_GET(blobs, o.field("blobs", json::value_t::array));
  for (size_t i = 0; i < blobs->size(); ++i) {
    const json& b = (*blobs)[i];
    if (!b.is_object()) return bad("blobs[" + std::to_string(i) + "] is not an object");
    const Obj bo{b, "blobs[" + std::to_string(i) + "]: "};
    MF_GET(file, bo.str("file"));
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      return bad("blob file name '" + file + "' must be a plain file name inside the directory");
    MF_GET(size, bo.u64("size"));
    m.blobs.push_back({file, size});
  }
  MF_GET(tensors, o.field("tensors", json::value_t::array));
  m.tensors.reserve(tensors->size());
  for (size_t i = 0; i < tensors->size(); ++i) {
    auto t = tensor_from((*tensors)[i], i);
    if (!t) return t.error();
    m.tensors.push_back(std::move(*t));
  }
  return m;
}

}  // namespace memra::format
