#include "repack/checkpoint/tensor_assembly.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

namespace memra {

namespace {

struct Piece {
  size_t source;
  int64_t index;       // -1: not stacked
  int64_t split_j = 0, split_n = 1;
};

std::string dims(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

Result<std::vector<AssembledTensor>> assemble_tensors(const CheckpointFamily& family, const std::vector<StoredTensor>& stored,
                                                      bool keep_unknown) {
  std::vector<AssembledTensor> out;
  std::map<std::string, std::vector<Piece>> pieces;  // canonical name -> its parts
  std::map<std::string, size_t> slot;                // canonical name -> its place in `out`
  for (size_t i = 0; i < stored.size(); ++i) {
    const StoredTensor& t = stored[i];
    auto parts = family.plugin.tensor_parts(family.format, t.name);
    if (!parts) return parts.error();
    if (!*parts) {
      auto name = family.canonical_name(t.name);
      if (!name) return name.error();
      if (!*name && !keep_unknown) continue;
      AssembledTensor a;
      a.name = name->value_or(t.name);
      a.known = name->has_value();
      a.shape = t.shape;
      a.scheme = t.scheme;
      a.bytes = t.bytes;
      a.segments.push_back({i, t.data, t.bytes});
      a.sources.push_back(i);
      out.push_back(std::move(a));
      continue;
    }
    const std::string who = "family plugin '" + family.plugin.info().name + "': tensor_parts of '" + t.name + "'";
    const auto j = nlohmann::json::parse(**parts, nullptr, false);
    if (!j.is_array() || j.empty()) return make_error(ErrorCode::internal, who + " is not a non-empty JSON array");
    if (t.shape.size() < 2 || t.shape.size() > 3)
      return make_error(ErrorCode::invalid_argument, "tensor '" + t.name + "' has shape " + dims(t.shape) +
                                                         ", but the family takes it as a part of a matrix (2 or 3 dims)");
    for (const auto& p : j) {
      if (!p.is_object() || !p.contains("name") || !p["name"].is_string())
        return make_error(ErrorCode::internal, who + ": a part without a name");
      Piece piece{i, -1};
      if (p.contains("index")) {
        if (!p["index"].is_number_integer() || p["index"].get<int64_t>() < 0) return make_error(ErrorCode::internal, who + ": bad index");
        piece.index = p["index"].get<int64_t>();
      }
      if (p.contains("split")) {
        const auto& s = p["split"];
        if (!s.is_array() || s.size() != 2 || !s[0].is_number_integer() || !s[1].is_number_integer() || s[1].get<int64_t>() <= 0 ||
            s[0].get<int64_t>() < 0 || s[0].get<int64_t>() >= s[1].get<int64_t>())
          return make_error(ErrorCode::internal, who + ": bad split");
        piece.split_j = s[0].get<int64_t>(), piece.split_n = s[1].get<int64_t>();
        if (t.shape[t.shape.size() - 2] % static_cast<uint64_t>(piece.split_n) != 0)
          return make_error(ErrorCode::invalid_argument, "tensor '" + t.name + "' of shape " + dims(t.shape) + " does not split into " +
                                                             std::to_string(piece.split_n) + " equal row ranges");
      }
      const std::string name = p["name"].get<std::string>();
      if (!slot.count(name)) {
        slot[name] = out.size();
        AssembledTensor a;
        a.name = name;
        out.push_back(std::move(a));
      }
      pieces[name].push_back(piece);
    }
  }

  for (const auto& [name, ps] : pieces) {
    AssembledTensor& a = out[slot[name]];
    const StoredTensor& first = stored[ps[0].source];
    const bool stacked = ps[0].index >= 0;
    // Every part: the same kind, dtype and piece shape.
    std::vector<uint64_t> piece_shape = first.shape;
    piece_shape[piece_shape.size() - 2] /= static_cast<uint64_t>(ps[0].split_n);
    for (const Piece& p : ps) {
      const StoredTensor& t = stored[p.source];
      std::vector<uint64_t> s = t.shape;
      s[s.size() - 2] /= static_cast<uint64_t>(p.split_n);
      if ((p.index >= 0) != stacked || t.scheme != first.scheme || s != piece_shape)
        return make_error(ErrorCode::invalid_argument, "tensor '" + name + "' is assembled from '" + first.name + "' (" + first.scheme +
                                                           " " + dims(first.shape) + ") and '" + t.name + "' (" + t.scheme + " " +
                                                           dims(t.shape) + "), which do not fit together");
    }
    std::vector<Piece> order = ps;
    if (stacked) {
      std::sort(order.begin(), order.end(), [](const Piece& x, const Piece& y) { return x.index < y.index; });
      for (size_t k = 0; k < order.size(); ++k)
        if (order[k].index != static_cast<int64_t>(k))
          return make_error(ErrorCode::invalid_argument, "tensor '" + name + "' stacks " + std::to_string(order.size()) +
                                                             " checkpoint tensors, but slice " + std::to_string(k) +
                                                             (order[k].index < static_cast<int64_t>(k) ? " comes twice" : " is missing"));
    } else if (order.size() != 1) {
      return make_error(ErrorCode::invalid_argument, "tensor '" + name + "' is named by " + std::to_string(order.size()) +
                                                         " checkpoint tensors ('" + stored[order[0].source].name + "', '" +
                                                         stored[order[1].source].name + "')");
    }
    a.shape = piece_shape;
    if (stacked) a.shape.insert(a.shape.begin(), static_cast<uint64_t>(order.size()));
    a.scheme = first.scheme;
    a.known = true;
    for (const Piece& p : order) {
      const StoredTensor& t = stored[p.source];
      const uint64_t rows_axis = t.shape[t.shape.size() - 2];
      uint64_t outer = 1;
      for (size_t d = 0; d + 2 < t.shape.size(); ++d) outer *= t.shape[d];
      const uint64_t row_bytes = t.bytes / (outer * rows_axis);
      const uint64_t take = rows_axis / static_cast<uint64_t>(p.split_n);
      for (uint64_t o = 0; o < outer; ++o) {
        const uint64_t offset = (o * rows_axis + take * static_cast<uint64_t>(p.split_j)) * row_bytes, bytes = take * row_bytes;
        TensorSegment seg{p.source, t.data + offset, bytes};
        if (!a.segments.empty() && a.segments.back().source == p.source &&
            a.segments.back().data + a.segments.back().bytes == seg.data)
          a.segments.back().bytes += bytes;  // contiguous: one segment
        else
          a.segments.push_back(seg);
        a.bytes += bytes;
      }
      if (std::find(a.sources.begin(), a.sources.end(), p.source) == a.sources.end()) a.sources.push_back(p.source);
    }
  }
  return out;
}

}  // namespace memra
