#include "host/json/bounded_parse.hpp"

#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace memra::jsonio {
namespace {

using ojson = nlohmann::ordered_json;
using Members = ojson::object_t::Container;  // ordered_map's vector of (key, value)

// Objects up to this many keys find a duplicate by scanning; larger ones keep a hash index.
constexpr std::size_t kScanKeys = 16;

struct Frame {
  ojson* container = nullptr;
  bool object = false;
  std::size_t count = 0;      // items or keys so far
  std::string key;            // object: the key whose value comes next
  std::unique_ptr<std::unordered_map<std::string, std::size_t>> index;  // large objects: key -> position
};

// Builds the document from nlohmann's SAX events (its parser is iterative).
class Builder {
 public:
  explicit Builder(const Limits& limits) : limits_(limits) {}

  bool null() { return value(ojson(nullptr)); }
  bool boolean(bool v) { return value(ojson(v)); }
  bool number_integer(ojson::number_integer_t v) { return value(ojson(v)); }
  bool number_unsigned(ojson::number_unsigned_t v) { return value(ojson(v)); }
  bool number_float(ojson::number_float_t v, const std::string&) { return value(ojson(v)); }
  bool string(std::string& v) {
    if (!charge(v.size() + 32)) return false;
    return value(ojson(std::move(v)));
  }
  bool binary(ojson::binary_t&) { return fail(ParseError::Kind::syntax, "binary values are not JSON"); }

  bool start_object(std::size_t) { return open(ojson::object(), true); }
  bool start_array(std::size_t) { return open(ojson::array(), false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string& k) {
    Frame& f = frames_.back();
    if (f.count + 1 > limits_.max_object_keys) {
      return fail(ParseError::Kind::object_keys,
                  "an object with more than " + std::to_string(limits_.max_object_keys) + " keys");
    }
    ++f.count;
    if (!charge(k.size() + 48 + (f.index ? 64 : 0))) return false;
    f.key = std::move(k);
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    if (error_) return false;  // a limit already stopped the parse
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    std::string what = e.what();
    const auto pos = what.find("] ");
    return fail(ParseError::Kind::syntax, pos == std::string::npos ? what : what.substr(pos + 2));
  }

  std::optional<ParseError>& error() { return error_; }
  ojson& root() { return root_; }

 private:
  bool charge(std::size_t bytes) {
    used_ += bytes;
    if (used_ <= limits_.max_memory_bytes) return true;
    return fail(ParseError::Kind::memory,
                "more than " + std::to_string(limits_.max_memory_bytes >> 20) + " MiB of values once parsed");
  }

  bool fail(ParseError::Kind kind, std::string message) {
    // A key or item too many: the container is the place; too deep (or too large): the
    // value just placed in the innermost container is.
    const bool container = kind == ParseError::Kind::object_keys || kind == ParseError::Kind::array_items;
    if (!error_) error_ = ParseError{kind, std::move(message), path(container ? frames_.size() - 1 : frames_.size())};
    return false;
  }

  // Where the parse is: the current key or item of the first `frames` open containers.
  std::string path(std::size_t frames) const {
    std::string p;
    for (std::size_t i = 0; i < frames && i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.object) {
        const auto& members = f.container->get_ref<const ojson::object_t&>();
        if (members.empty()) break;
        if (!p.empty()) p += '.';
        p += members.back().first;
      } else {
        if (f.count == 0) break;
        p += '[';
        p += std::to_string(f.count - 1);
        p += ']';
      }
    }
    return p;
  }

  // Places `v` where the parse is and returns it (the new container for open()).
  ojson* place(ojson&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    if (!f.object) {
      if (f.count + 1 > limits_.max_array_items) {
        fail(ParseError::Kind::array_items, "an array with more than " + std::to_string(limits_.max_array_items) + " items");
        return nullptr;
      }
      ++f.count;
      auto& items = f.container->get_ref<ojson::array_t&>();
      items.push_back(std::move(v));
      return &items.back();
    }
    Members& members = f.container->get_ref<ojson::object_t&>();
    // A repeated key: the last value wins, in the first one's place (nlohmann's parse).
    if (f.index) {
      if (auto it = f.index->find(f.key); it != f.index->end()) {
        members[it->second].second = std::move(v);
        return &members[it->second].second;
      }
    } else {
      for (auto& [k, existing] : members)
        if (k == f.key) {
          existing = std::move(v);
          return &existing;
        }
    }
    if (!f.index && members.size() >= kScanKeys) {
      f.index = std::make_unique<std::unordered_map<std::string, std::size_t>>();
      f.index->reserve(2 * kScanKeys);
      for (std::size_t i = 0; i < members.size(); ++i) f.index->emplace(members[i].first, i);
    }
    if (f.index) f.index->emplace(f.key, members.size());
    members.emplace_back(std::move(f.key), std::move(v));
    return &members.back().second;
  }

  bool value(ojson&& v) {
    if (!charge(sizeof(ojson))) return false;
    return place(std::move(v)) != nullptr;
  }

  bool open(ojson&& container, bool object) {
    if (!charge(sizeof(ojson) + 32)) return false;
    ojson* c = place(std::move(container));
    if (c == nullptr) return false;
    // After placing it, so the path names the container that goes too deep.
    if (frames_.size() + 1 > limits_.max_depth) {
      return fail(ParseError::Kind::depth, "nesting deeper than " + std::to_string(limits_.max_depth) + " levels");
    }
    frames_.push_back(Frame{c, object, 0, {}, nullptr});
    return true;
  }

  bool close() {
    frames_.pop_back();
    return true;
  }

  const Limits& limits_;
  ojson root_;
  std::vector<Frame> frames_;
  std::size_t used_ = 0;
  std::optional<ParseError> error_;
};

}  // namespace

std::optional<nlohmann::ordered_json> parse(std::string_view text, const Limits& limits, ParseError* error) {
  Builder b(limits);
  const char* begin = text.data();
  const bool ok = ojson::sax_parse(begin, begin + text.size(), &b, nlohmann::detail::input_format_t::json,
                                   /*strict=*/true);
  if (ok && !b.error()) return std::move(b.root());
  if (error) {
    *error = b.error() ? *b.error() : ParseError{ParseError::Kind::syntax, "the text is not valid JSON", ""};
  }
  return std::nullopt;
}

std::string top_field(std::string_view path) {
  const auto end = path.find_first_of(".[");
  return std::string(path.substr(0, end));
}

}  // namespace memra::jsonio
