#include "host/structured/json_grammar.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "host/structured/number_grammar.hpp"
#include "host/structured/string_automaton.hpp"

namespace memra::structured {

using json = nlohmann::ordered_json;

namespace {

constexpr int64_t kMaxBound = 4096;  // largest minLength/maxLength/minItems/maxItems unrolled into rules
constexpr int kMaxIntegerDigits = 16;

const std::set<std::string, std::less<>>& annotations() {
  static const std::set<std::string, std::less<>> k = {"title",    "description", "default",  "examples",
                                                       "$schema",  "$id",         "$comment", "deprecated",
                                                       "readOnly", "writeOnly",   "$defs",    "definitions"};
  return k;
}

const std::set<std::string, std::less<>>& supported() {
  static const std::set<std::string, std::less<>> k = {
      "type",      "enum",       "const",     "anyOf",     "oneOf",    "allOf",    "$ref",
      "properties", "required",  "additionalProperties", "items", "prefixItems", "minItems", "maxItems",
      "minLength", "maxLength",  "format",    "pattern",  "minimum",  "maximum",  "exclusiveMinimum",
      "exclusiveMaximum"};
  return k;
}

ExprPtr ch(char c) { return cls(ByteSet{}.add(static_cast<uint8_t>(c))); }
ExprPtr digit() { return cls(ByteSet::range('0', '9')); }
ExprPtr hex() { return cls(ByteSet::range('0', '9').add_range('a', 'f').add_range('A', 'F')); }
ExprPtr cont() { return cls(ByteSet::range(0x80, 0xBF)); }

std::string unescape_pointer(const std::string& token) {
  std::string out;
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
      out += token[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      out += token[i];
    }
  }
  return out;
}

}  // namespace

struct JsonGrammarCompiler::Impl {
  GrammarBuilder& b;
  const json* root = nullptr;
  std::map<std::string, uint32_t> refs;  // JSON pointer -> its rule
  // Referenced schemas declared but not compiled yet: compile() drains the list, so a
  // chain of $refs is a loop, not a recursion as deep as the chain.
  struct Pending {
    const json* node;
    std::string path;
    uint32_t rule;
  };
  std::vector<Pending> pending;
  bool referred = false;  // this schema used a $ref: only then can a rule refer to itself
  std::optional<uint32_t> ws_rule, char_rule, string_rule, number_rule, value_rule, object_rule;
  std::map<std::string, uint32_t> automaton_strings;  // pattern / format / length -> its rule
  std::map<std::string, Dfa> patterns;                  // pattern text -> its automaton
  std::optional<SchemaError> err;

  explicit Impl(GrammarBuilder& builder) : b(builder) {}

  void fail(std::string keyword, const std::string& ptr, std::string message, bool unsupported = true) {
    if (err) return;
    err = SchemaError{keyword, ptr, message, unsupported};
  }
  static std::string where(const std::string& ptr) { return ptr.empty() ? "the schema's root" : "'" + ptr + "'"; }

  ExprPtr ws() {
    if (!ws_rule) ws_rule = b.add(alt({seq({}), ch(' '), seq({ch('\n'), rep(cls(ByteSet::of(" \t")), 0, 24)})}));
    return ref(*ws_rule);
  }

  // One character inside a JSON string: printable ASCII but '"' and '\\', an escape (a
  // surrogate only as the pair that writes one character), or a well-formed UTF-8 sequence.
  ExprPtr string_char() {
    if (!char_rule) {
      ByteSet plain = ByteSet::range(0x20, 0x7F);
      plain.remove("\"\\");
      const ExprPtr d = cls(ByteSet::of("dD"));
      const ExprPtr bmp = alt({seq({cls(ByteSet::range('0', '9').add_range('a', 'c').add_range('A', 'C').add_range('e', 'f').add_range('E', 'F')), hex(), hex(), hex()}),
                               seq({d, cls(ByteSet::range('0', '7')), hex(), hex()})});
      const ExprPtr pair = seq({d, cls(ByteSet::of("89abAB")), hex(), hex(), ch('\\'), ch('u'), d,
                                cls(ByteSet::range('c', 'f').add_range('C', 'F')), hex(), hex()});
      char_rule = b.add(alt({
          cls(plain),
          seq({ch('\\'), alt({cls(ByteSet::of("\"\\/bfnrt")), seq({ch('u'), bmp}), seq({ch('u'), pair})})}),
          seq({cls(ByteSet::range(0xC2, 0xDF)), cont()}),
          seq({ch('\xE0'), cls(ByteSet::range(0xA0, 0xBF)), cont()}),
          seq({cls(ByteSet::range(0xE1, 0xEC).add_range(0xEE, 0xEF)), cont(), cont()}),
          seq({ch('\xED'), cls(ByteSet::range(0x80, 0x9F)), cont()}),
          seq({ch('\xF0'), cls(ByteSet::range(0x90, 0xBF)), cont(), cont()}),
          seq({cls(ByteSet::range(0xF1, 0xF3)), cont(), cont(), cont()}),
          seq({ch('\xF4'), cls(ByteSet::range(0x80, 0x8F)), cont(), cont()}),
      }));
    }
    return ref(*char_rule);
  }

  ExprPtr any_string() {
    if (!string_rule) string_rule = b.add(seq({ch('"'), star(string_char()), ch('"')}));
    return ref(*string_rule);
  }

  ExprPtr integer() {
    return seq({opt(ch('-')), alt({ch('0'), seq({cls(ByteSet::range('1', '9')), rep(digit(), 0, kMaxIntegerDigits - 1)})})});
  }
  ExprPtr number() {
    if (!number_rule) {
      number_rule = b.add(seq({integer(), opt(seq({ch('.'), rep(digit(), 1, kMaxIntegerDigits)})),
                               opt(seq({cls(ByteSet::of("eE")), opt(cls(ByteSet::of("+-"))), rep(digit(), 1, 3)}))}));
    }
    return ref(*number_rule);
  }

  ExprPtr any_value() {
    if (!value_rule) {
      value_rule = b.declare();
      const ExprPtr v = ref(*value_rule);
      const ExprPtr array = seq({ch('['), ws(), opt(seq({v, star(seq({ch(','), ws(), v})), ws()})), ch(']')});
      b.define(*value_rule, alt({any_object(), array, any_string(), number(), lit("true"), lit("false"), lit("null")}));
    }
    return ref(*value_rule);
  }

  ExprPtr map_of(const ExprPtr& value) {
    const ExprPtr member = seq({any_string(), ch(':'), ws(), value});
    return seq({ch('{'), ws(), opt(seq({member, star(seq({ch(','), ws(), member})), ws()})), ch('}')});
  }

  ExprPtr any_object() {
    if (!object_rule) {
      object_rule = b.declare();
      b.define(*object_rule, map_of(any_value()));
    }
    return ref(*object_rule);
  }

  ExprPtr literal_value(const json& v) { return lit(v.dump(-1, ' ', false, json::error_handler_t::strict)); }

  bool bound(const json& s, const char* key, const std::string& ptr, int64_t& out) {
    auto it = s.find(key);
    if (it == s.end()) return false;
    if (!it->is_number_integer() || it->get<int64_t>() < 0) {
      fail(key, ptr, "'" + std::string(key) + "' at " + where(ptr) + " must be a non-negative integer", false);
      return false;
    }
    if (it->get<int64_t>() > kMaxBound) {
      fail(key, ptr, "'" + std::string(key) + "' at " + where(ptr) + " is over " + std::to_string(kMaxBound) +
                         ", the largest bound memra-host's structured outputs enforce");
      return false;
    }
    out = it->get<int64_t>();
    return true;
  }

  ExprPtr resolve_ref(const std::string& target, const std::string& ptr) {
    referred = true;
    if (target.empty() || target[0] != '#') {
      fail("$ref", ptr, "'$ref' at " + where(ptr) + " is '" + target + "'; only references inside the schema (#/...) are supported");
      return seq({});
    }
    if (auto it = refs.find(target); it != refs.end()) return ref(it->second);
    if (refs.size() > kMaxSchemaRefs) {
      fail("$ref", ptr, "'$ref' at " + where(ptr) + ": the schema refers to more than " + std::to_string(kMaxSchemaRefs) +
                            " different definitions, memra-host's limit; merge or inline some",
           false);
      return seq({});
    }
    const json* node = root;
    std::string rest = target.substr(1);
    std::string path;
    while (!rest.empty()) {
      if (rest[0] != '/') break;
      const size_t next = rest.find('/', 1);
      const std::string token = unescape_pointer(rest.substr(1, next == std::string::npos ? std::string::npos : next - 1));
      rest = next == std::string::npos ? "" : rest.substr(next);
      path += "/" + token;
      if (node->is_object() && node->contains(token)) {
        node = &(*node)[token];
      } else if (node->is_array() && !token.empty() && token.size() <= 9 &&
                 token.find_first_not_of("0123456789") == std::string::npos && std::stoul(token) < node->size()) {
        node = &(*node)[std::stoul(token)];
      } else {
        node = nullptr;
        break;
      }
    }
    if (node == nullptr || !rest.empty()) {
      fail("$ref", ptr, "'$ref' at " + where(ptr) + " points to '" + target + "', which the schema does not have", false);
      return seq({});
    }
    const uint32_t r = b.declare();
    refs.emplace(target, r);  // before compiling it: recursive schemas refer to it
    pending.push_back({node, path, r});
    return ref(r);
  }

  // `e` repeated as a bounded keyword asks, or a failure naming the keyword when the
  // unrolled repetition would pass the grammar's element limit (the cost is computed from
  // the structure: nested repetitions multiply; nothing is expanded to find out).
  ExprPtr bounded(const ExprPtr& e, const char* keyword, const std::string& ptr) {
    const uint64_t cost = GrammarBuilder::cost(e);
    if (cost + b.elements() > b.max_elements()) {
      fail(keyword, ptr,
           "'" + std::string(keyword) + "' at " + where(ptr) + " makes the grammar too large to enforce: " +
               (cost >= (uint64_t{1} << 62) ? std::string("astronomically many") : std::to_string(cost)) +
               " elements once repetitions are unrolled (nested counts multiply), over memra-host's limit of " +
               std::to_string(b.max_elements()) + "; lower the bound or nest fewer bounded arrays/strings",
           false);
      return seq({});
    }
    return e;
  }

  ExprPtr object(const json& s, const std::string& ptr) {
    std::vector<std::pair<std::string, ExprPtr>> props;
    std::set<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) {
        fail("required", ptr, "'required' at " + where(ptr) + " must be an array of property names", false);
        return seq({});
      }
      for (const auto& r : *it) {
        if (!r.is_string()) {
          fail("required", ptr, "'required' at " + where(ptr) + " must be an array of property names", false);
          return seq({});
        }
        required.insert(r.get<std::string>());
      }
    }
    std::set<std::string> listed;
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) {
        fail("properties", ptr, "'properties' at " + where(ptr) + " must be an object", false);
        return seq({});
      }
      for (const auto& [name, sub] : it->items()) {
        props.emplace_back(name, schema(sub, ptr + "/properties/" + name));
        listed.insert(name);
      }
    }
    // Required names without a schema of their own take any value.
    for (const auto& r : required)
      if (!listed.count(r)) props.emplace_back(r, any_value());
    const auto extra = s.find("additionalProperties");
    if (extra != s.end() && !extra->is_boolean() && !extra->is_object()) {
      fail("additionalProperties", ptr, "'additionalProperties' at " + where(ptr) + " must be a boolean or a schema", false);
      return seq({});
    }
    if (props.empty()) {
      if (extra != s.end() && extra->is_boolean() && !extra->get<bool>()) return seq({ch('{'), ws(), ch('}')});
      if (extra != s.end() && extra->is_object()) return map_of(schema(*extra, ptr + "/additionalProperties"));
      return any_object();
    }
    // Properties in schema order; optional ones may be left out. first_i: properties
    // i.. with none written yet; after_i: the same once one is (so a ',' comes first).
    const size_t n = props.size();
    std::vector<uint32_t> first(n + 1), after(n + 1);
    for (size_t i = 0; i <= n; ++i) {
      first[i] = b.declare();
      after[i] = b.declare();
    }
    b.define(first[n], seq({}));
    b.define(after[n], seq({}));
    for (size_t i = n; i-- > 0;) {
      const bool optional = required.count(props[i].first) == 0;
      const ExprPtr member = seq({literal_value(json(props[i].first)), ch(':'), ws(), props[i].second});
      std::vector<ExprPtr> a = {seq({ch(','), ws(), member, ref(after[i + 1])})};
      std::vector<ExprPtr> f = {seq({member, ref(after[i + 1])})};
      if (optional) {
        a.push_back(ref(after[i + 1]));
        f.push_back(ref(first[i + 1]));
      }
      b.define(after[i], alt(std::move(a)));
      b.define(first[i], alt(std::move(f)));
    }
    return seq({ch('{'), ws(), ref(first[0]), ws(), ch('}')});
  }

  ExprPtr array(const json& s, const std::string& ptr) {
    int64_t lo = 0, hi = -1;
    bound(s, "minItems", ptr, lo);
    bound(s, "maxItems", ptr, hi);
    if (hi >= 0 && hi < lo) {
      fail("maxItems", ptr, "'maxItems' at " + where(ptr) + " is below 'minItems'", false);
      return seq({});
    }
    std::vector<ExprPtr> prefix;
    if (auto it = s.find("prefixItems"); it != s.end()) {
      if (!it->is_array()) {
        fail("prefixItems", ptr, "'prefixItems' at " + where(ptr) + " must be an array of schemas", false);
        return seq({});
      }
      for (size_t i = 0; i < it->size(); ++i) prefix.push_back(schema((*it)[i], ptr + "/prefixItems/" + std::to_string(i)));
    }
    std::optional<ExprPtr> items;  // unset: items false
    const auto it = s.find("items");
    if (it == s.end()) items = any_value();
    else if (it->is_boolean()) {
      if (it->get<bool>()) items = any_value();
    } else if (it->is_object()) {
      items = schema(*it, ptr + "/items");
    } else {
      fail("items", ptr, "'items' at " + where(ptr) + " must be a schema", false);
      return seq({});
    }
    const auto k = static_cast<int64_t>(prefix.size());
    if (hi >= 0 && hi < k) {
      fail("maxItems", ptr, "'maxItems' at " + where(ptr) + " is below the number of prefixItems", false);
      return seq({});
    }
    // Exactly the prefix items, then lo-k..hi-k further items (none when items is false).
    const int64_t extra_lo = std::max<int64_t>(0, lo - k);
    const int64_t extra_hi = items ? (hi < 0 ? -1 : hi - k) : extra_lo;
    if (extra_lo > 0 && !items) {
      fail("minItems", ptr, "'minItems' at " + where(ptr) + " needs more items than prefixItems allows with items false", false);
      return seq({});
    }
    std::vector<ExprPtr> elems;
    for (int64_t i = 0; i < k; ++i) {
      if (i > 0) elems.push_back(seq({ch(','), ws()}));
      elems.push_back(prefix[static_cast<size_t>(i)]);
    }
    if (hi == 0) return seq({ch('['), ws(), ch(']')});
    const char* keyword = extra_hi >= 0 && extra_hi > 2 * extra_lo ? "maxItems" : "minItems";
    if (k == 0) {
      const ExprPtr rest = bounded(seq({*items, rep(seq({ch(','), ws(), *items}), std::max<int64_t>(0, extra_lo - 1), extra_hi < 0 ? -1 : extra_hi - 1)}),
                                   keyword, ptr);
      if (extra_lo == 0) return seq({ch('['), ws(), opt(seq({rest, ws()})), ch(']')});
      return seq({ch('['), ws(), rest, ws(), ch(']')});
    }
    if (items && extra_hi != 0) elems.push_back(rep(seq({ch(','), ws(), *items}), extra_lo, extra_hi));
    return seq({ch('['), ws(), bounded(seq(std::move(elems)), keyword, ptr), ws(), ch(']')});
  }

  ExprPtr string(const json& s, const std::string& ptr) {
    int64_t lo = 0, hi = -1;
    const bool has_lo = bound(s, "minLength", ptr, lo);
    const bool has_hi = bound(s, "maxLength", ptr, hi);
    if (hi >= 0 && hi < lo) {
      fail("maxLength", ptr, "'maxLength' at " + where(ptr) + " is below 'minLength'", false);
      return seq({});
    }
    const auto f = s.find("format");
    const auto p = s.find("pattern");
    if (f == s.end() && p == s.end()) {
      if (!has_lo && !has_hi) return any_string();
      return seq({ch('"'), bounded(rep(string_char(), lo, hi), hi >= 0 && hi > 2 * lo ? "maxLength" : "minLength", ptr), ch('"')});
    }
    return automaton_string(s, ptr, p, f, has_lo || has_hi ? lo : -1, hi);
  }

  // The automaton of a 'pattern' (compiled once per text), or null after failing.
  const Dfa* pattern_automaton(const json& p, const std::string& ptr) {
    if (!p.is_string()) {
      fail("pattern", ptr, "'pattern' at " + where(ptr) + " must be a string", false);
      return nullptr;
    }
    const std::string text = p.get<std::string>();
    if (auto it = patterns.find(text); it != patterns.end()) return &it->second;
    Dfa d;
    if (auto e = compile_pattern(text, d)) {
      const std::string shown = text.size() > 80 ? text.substr(0, 77) + "..." : text;
      fail("pattern", ptr, "'pattern' at " + where(ptr) + " (" + json(shown).dump(-1, ' ', false, json::error_handler_t::replace) + "): " + e->message,
           e->unsupported);
      return nullptr;
    }
    if (d.states.empty()) {
      fail("pattern", ptr, "'pattern' at " + where(ptr) + " matches no string", false);
      return nullptr;
    }
    return &patterns.emplace(text, std::move(d)).first->second;
  }

  // The automaton of a 'format' memra-host enforces, or null after failing.
  const Dfa* format_of(const json& f, const std::string& ptr) {
    const Dfa* fd = format_automaton(f.is_string() ? f.get<std::string>() : "");
    if (fd == nullptr) {
      fail("format", ptr, "'format': " + f.dump() + " at " + where(ptr) +
                              " is not supported (memra-host enforces date, time, date-time, duration, email, hostname, ipv4, ipv6 and uuid)");
    }
    return fd;
  }

  // Whether `v` (a value of 'enum' or 'const') meets the keywords beside it that constrain a
  // value's type and shape: type, numeric bounds, lengths, pattern, format, item counts. A listed
  // value that does not is never written. After a failure (a keyword that cannot be read), false.
  bool meets_siblings(const json& s, const json& v, const std::string& ptr) {
    if (auto t = s.find("type"); t != s.end()) {
      auto is = [&](const json& type) {
        if (!type.is_string()) return false;
        const std::string n = type.get<std::string>();
        if (n == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
        return (n == "number" && v.is_number()) || (n == "string" && v.is_string()) || (n == "boolean" && v.is_boolean()) ||
               (n == "null" && v.is_null()) || (n == "array" && v.is_array()) || (n == "object" && v.is_object());
      };
      bool ok = is(*t);
      if (t->is_array())
        for (const auto& x : *t) ok = ok || is(x);
      if (!ok) return false;
    }
    if (v.is_number()) {
      Bounds bd;
      if (!numeric_bounds(s, ptr, bd)) return false;
      const double x = v.get<double>();
      if (bd.lo && (bd.lo->exclusive ? !(x > bd.lo->value) : !(x >= bd.lo->value))) return false;
      if (bd.hi && (bd.hi->exclusive ? !(x < bd.hi->value) : !(x <= bd.hi->value))) return false;
    }
    if (v.is_string()) {
      int64_t lo = 0, hi = -1;
      bound(s, "minLength", ptr, lo);
      bound(s, "maxLength", ptr, hi);
      const std::string& text = v.get_ref<const std::string&>();
      const auto n = static_cast<int64_t>(std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<uint8_t>(c) & 0xC0) != 0x80; }));
      if (err || n < lo || (hi >= 0 && n > hi)) return false;
      if (auto p = s.find("pattern"); p != s.end()) {
        const Dfa* d = pattern_automaton(*p, ptr);
        if (d == nullptr || !string_matches(*d, text)) return false;
      }
      if (auto f = s.find("format"); f != s.end()) {
        const Dfa* d = format_of(*f, ptr);
        if (d == nullptr || !string_matches(*d, text)) return false;
      }
    }
    if (v.is_array()) {
      int64_t lo = 0, hi = -1;
      bound(s, "minItems", ptr, lo);
      bound(s, "maxItems", ptr, hi);
      const auto n = static_cast<int64_t>(v.size());
      if (err || n < lo || (hi >= 0 && n > hi)) return false;
    }
    return !err;
  }

  // A string under 'pattern' and/or 'format' (and the length bounds, lo < 0: none): their
  // automata intersected, lowered into rules shared by every use of the same keywords.
  ExprPtr automaton_string(const json& s, const std::string& ptr, json::const_iterator p, json::const_iterator f, int64_t lo, int64_t hi) {
    const std::string key = (p != s.end() ? p->dump() : "") + '\n' + (f != s.end() ? f->dump() : "") + '\n' + std::to_string(lo) + ',' + std::to_string(hi);
    if (auto it = automaton_strings.find(key); it != automaton_strings.end()) return ref(it->second);
    Dfa d;
    const char* last = "pattern";  // the keyword whose automaton came last (an empty language names it)
    if (p != s.end()) {
      const Dfa* pd = pattern_automaton(*p, ptr);
      if (pd == nullptr) return seq({});
      d = *pd;
    }
    if (f != s.end()) {
      const Dfa* fd = format_of(*f, ptr);
      if (fd == nullptr) return seq({});
      if (p != s.end()) {
        Dfa both;
        if (auto e = intersect(d, *fd, both)) {
          fail("pattern", ptr, "'pattern' with 'format' at " + where(ptr) + ": " + e->message, false);
          return seq({});
        }
        d = std::move(both);
      } else {
        d = *fd;
      }
      last = "format";
      if (d.states.empty()) {
        fail("format", ptr, "'pattern' and 'format' at " + where(ptr) + " have no string in common", false);
        return seq({});
      }
    }
    if (lo >= 0) {
      last = hi >= 0 ? "maxLength" : "minLength";
      Dfa sized;
      if (auto e = bound_length(d, lo, hi, sized)) {
        fail(last, ptr, "'" + std::string(last) + "' at " + where(ptr) + " with 'pattern' or 'format': " + e->message, false);
        return seq({});
      }
      d = std::move(sized);
      if (d.states.empty()) {
        fail(last, ptr, "'minLength' / 'maxLength' at " + where(ptr) + " leave no string the 'pattern' or 'format' allows", false);
        return seq({});
      }
    }
    const uint64_t cost = json_string_cost(d);
    if (cost + b.elements() > b.max_elements()) {
      fail(last, ptr, "'" + std::string(last) + "' at " + where(ptr) + " makes the grammar too large to enforce: " + std::to_string(cost) +
                          " elements, over memra-host's limit of " + std::to_string(b.max_elements()),
           false);
      return seq({});
    }
    const uint32_t r = b.add(json_string(d, b));
    automaton_strings.emplace(key, r);
    return ref(r);
  }

  // minimum / exclusiveMinimum and maximum / exclusiveMaximum (a number each, or draft 4's
  // boolean exclusive* beside minimum / maximum); the tighter of two on one side wins.
  struct Bounds {
    std::optional<NumberBound> lo, hi;
    std::string lo_key, hi_key;
  };
  bool numeric_bounds(const json& s, const std::string& ptr, Bounds& out) {
    for (const bool lower : {true, false}) {
      const std::string inclusive = lower ? "minimum" : "maximum";
      const std::string exclusive = lower ? "exclusiveMinimum" : "exclusiveMaximum";
      std::optional<NumberBound>& bound_out = lower ? out.lo : out.hi;
      std::string& key = lower ? out.lo_key : out.hi_key;
      const auto inc = s.find(inclusive), exc = s.find(exclusive);
      if (inc != s.end()) {
        if (!inc->is_number()) {
          fail(inclusive, ptr, "'" + inclusive + "' at " + where(ptr) + " must be a number", false);
          return false;
        }
        bound_out = NumberBound{inc->get<double>(), false};
        key = inclusive;
      }
      if (exc == s.end()) continue;
      if (exc->is_boolean()) {
        if (inc == s.end() && exc->get<bool>()) {
          fail(exclusive, ptr, "'" + exclusive + "': true at " + where(ptr) + " needs '" + inclusive + "' beside it", false);
          return false;
        }
        if (bound_out) bound_out->exclusive = exc->get<bool>();
        if (exc->get<bool>()) key = exclusive;
      } else if (exc->is_number()) {
        const double v = exc->get<double>();
        if (!bound_out || (lower ? v >= bound_out->value : v <= bound_out->value)) {
          bound_out = NumberBound{v, true};
          key = exclusive;
        }
      } else {
        fail(exclusive, ptr, "'" + exclusive + "' at " + where(ptr) + " must be a number", false);
        return false;
      }
    }
    return true;
  }

  // `contradictory`: the bounds exclude every value, not only those memra-host can write.
  void no_value_within(const Bounds& bd, const std::string& ptr, const char* what, bool contradictory) {
    const std::string key = bd.lo ? bd.lo_key : bd.hi_key;
    if (contradictory) {
      fail(key, ptr, "'" + bd.lo_key + "' and '" + bd.hi_key + "' at " + where(ptr) + " leave no " + what + " between them", false);
    } else {
      fail(key, ptr, "'" + key + "' at " + where(ptr) + " leaves no " + what + " memra-host can write (" +
                         (std::string(what) == "integer" ? "a bounded integer is within +-(2^53 - 1)"
                                                         : "a bounded number has at most 16 integer and 16 fraction digits, no exponent") +
                         ")");
    }
  }

  ExprPtr bounded_integer(const json& s, const std::string& ptr) {
    Bounds bd;
    if (!numeric_bounds(s, ptr, bd)) return seq({});
    if (!bd.lo && !bd.hi) return integer();
    const auto safe = static_cast<double>(kMaxSafeInteger);
    const double first = bd.lo ? (bd.lo->exclusive ? std::floor(bd.lo->value) + 1 : std::ceil(bd.lo->value)) : -HUGE_VAL;
    const double last = bd.hi ? (bd.hi->exclusive ? std::ceil(bd.hi->value) - 1 : std::floor(bd.hi->value)) : HUGE_VAL;
    const double lo = std::max(first, -safe), hi = std::min(last, safe);
    if (lo > hi) {
      no_value_within(bd, ptr, "integer", first > last);
      return seq({});
    }
    return integer_range(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
  }

  ExprPtr bounded_number(const json& s, const std::string& ptr) {
    Bounds bd;
    if (!numeric_bounds(s, ptr, bd)) return seq({});
    if (!bd.lo && !bd.hi) return number();
    ExprPtr e = number_range(bd.lo, bd.hi, b);
    if (!e) {
      const bool contradictory = bd.lo && bd.hi &&
                                 (bd.lo->value > bd.hi->value || (bd.lo->value == bd.hi->value && (bd.lo->exclusive || bd.hi->exclusive)));
      no_value_within(bd, ptr, "number", contradictory);
      return seq({});
    }
    return e;
  }

  ExprPtr typed(const std::string& type, const json& s, const std::string& ptr) {
    if (type == "object") return object(s, ptr);
    if (type == "array") return array(s, ptr);
    if (type == "string") return string(s, ptr);
    if (type == "integer") return bounded_integer(s, ptr);
    if (type == "number") return bounded_number(s, ptr);
    if (type == "boolean") return alt({lit("true"), lit("false")});
    if (type == "null") return lit("null");
    fail("type", ptr, "'type' at " + where(ptr) + " is '" + type + "'; expected object, array, string, integer, number, boolean or null", false);
    return seq({});
  }

  ExprPtr schema(const json& s, const std::string& ptr) {
    if (err) return seq({});
    if (s.is_boolean()) {
      if (s.get<bool>()) return any_value();
      fail("", ptr, "the schema at " + where(ptr) + " is false: no value can match it", false);
      return seq({});
    }
    if (!s.is_object()) {
      fail("", ptr, "the schema at " + where(ptr) + " must be an object or a boolean", false);
      return seq({});
    }
    for (const auto& [key, unused] : s.items()) {
      if (annotations().count(key) || supported().count(key)) continue;
      fail(key, ptr, "'" + key + "' at " + where(ptr) + " is not supported by memra-host's structured outputs");
      return seq({});
    }
    if (auto r = s.find("$ref"); r != s.end()) {
      if (!r->is_string()) {
        fail("$ref", ptr, "'$ref' at " + where(ptr) + " must be a string", false);
        return seq({});
      }
      for (const auto& [key, unused] : s.items())
        if (!annotations().count(key) && key != "$ref") {
          fail(key, ptr, "'" + key + "' beside '$ref' at " + where(ptr) + " is not supported");
          return seq({});
        }
      return resolve_ref(r->get<std::string>(), ptr);
    }
    if (auto c = s.find("const"); c != s.end()) {
      if (!meets_siblings(s, *c, ptr)) {
        fail("const", ptr, "'const' at " + where(ptr) + " does not meet the keywords beside it, so no value matches the schema", false);
        return seq({});
      }
      return literal_value(*c);
    }
    if (auto e = s.find("enum"); e != s.end()) {
      if (!e->is_array() || e->empty()) {
        fail("enum", ptr, "'enum' at " + where(ptr) + " must be a non-empty array", false);
        return seq({});
      }
      if (e->size() > kMaxAlternatives) {
        fail("enum", ptr, "'enum' at " + where(ptr) + " has more than " + std::to_string(kMaxAlternatives) +
                              " values, memra-host's limit", false);
        return seq({});
      }
      std::vector<ExprPtr> options;
      for (const auto& v : *e)
        if (meets_siblings(s, v, ptr)) options.push_back(literal_value(v));
      if (options.empty()) {
        fail("enum", ptr, "no value of 'enum' at " + where(ptr) + " meets the keywords beside it, so no value matches the schema", false);
        return seq({});
      }
      return alt(std::move(options));
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      if (!it->is_array() || it->empty()) {
        fail(key, ptr, "'" + std::string(key) + "' at " + where(ptr) + " must be a non-empty array of schemas", false);
        return seq({});
      }
      for (const auto& [other, unused] : s.items())
        if (other != key && !annotations().count(other)) {
          fail(other, ptr, "'" + other + "' beside '" + key + "' at " + where(ptr) + " is not supported; move it into each branch");
          return seq({});
        }
      if (std::string(key) == "allOf") {
        if (it->size() != 1) {
          fail("allOf", ptr, "'allOf' with more than one schema at " + where(ptr) + " is not supported");
          return seq({});
        }
        return schema((*it)[0], ptr + "/allOf/0");
      }
      if (it->size() > kMaxAlternatives) {
        fail(key, ptr, "'" + std::string(key) + "' at " + where(ptr) + " has more than " + std::to_string(kMaxAlternatives) +
                           " schemas, memra-host's limit", false);
        return seq({});
      }
      std::vector<ExprPtr> options;
      for (size_t i = 0; i < it->size(); ++i) options.push_back(schema((*it)[i], ptr + "/" + key + "/" + std::to_string(i)));
      return alt(std::move(options));
    }
    std::vector<std::string> types;
    if (auto t = s.find("type"); t != s.end()) {
      if (t->is_string()) types.push_back(t->get<std::string>());
      else if (t->is_array() && !t->empty()) {
        for (const auto& x : *t) {
          if (!x.is_string()) {
            fail("type", ptr, "'type' at " + where(ptr) + " must be a string or an array of strings", false);
            return seq({});
          }
          types.push_back(x.get<std::string>());
        }
      } else {
        fail("type", ptr, "'type' at " + where(ptr) + " must be a string or an array of strings", false);
        return seq({});
      }
    } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("format") || s.contains("pattern")) {
      types.push_back("string");
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum")) {
      types.push_back("number");
    } else {
      return any_value();
    }
    std::vector<ExprPtr> options;
    for (const auto& t : types) options.push_back(typed(t, s, ptr));
    return alt(std::move(options));
  }
};

JsonGrammarCompiler::JsonGrammarCompiler(GrammarBuilder& builder) : impl_(std::make_shared<Impl>(builder)) {}

std::optional<SchemaError> JsonGrammarCompiler::compile(const json& schema, uint32_t& rule) {
  Impl& c = *impl_;
  c.err.reset();
  c.root = &schema;
  c.refs.clear();
  c.pending.clear();
  c.referred = false;
  const uint32_t r = c.b.declare();
  c.refs.emplace("#", r);
  c.b.define(r, c.schema(schema, ""));
  while (!c.pending.empty()) {  // referenced schemas, each once (after a failure: defined empty)
    Impl::Pending p = std::move(c.pending.back());
    c.pending.pop_back();
    c.b.define(p.rule, c.err ? seq({}) : c.schema(*p.node, p.path));
  }
  rule = r;
  if (!c.err && c.b.over_limit()) {
    c.fail("", "", "the schema compiles to a grammar too large to enforce (over " + std::to_string(c.b.max_elements()) +
                      " elements)",
           false);
  }
  // A schema that only refers to itself ({"$ref": "#"}, a -> b -> a, anyOf of itself) has
  // no finite value: refused, never compiled into a grammar that cannot end. Only a $ref
  // makes a cycle, so schemas without one skip the pass over the whole grammar.
  if (!c.err && c.referred && !c.b.productive()[r]) {
    c.fail("$ref", "", "the schema refers to itself with no way to end (a '$ref' cycle that reaches no value), so no JSON value matches it", false);
  }
  return c.err;
}

uint32_t JsonGrammarCompiler::any_value() {
  impl_->any_value();
  return *impl_->value_rule;
}

uint32_t JsonGrammarCompiler::any_object() {
  impl_->any_object();
  return *impl_->object_rule;
}

ExprPtr JsonGrammarCompiler::ws() { return impl_->ws(); }

Result<Grammar> grammar_for_schema(const json& schema, SchemaError* error) {
  GrammarBuilder b(kMaxGrammarElements);
  JsonGrammarCompiler c(b);
  uint32_t root = 0;
  if (auto e = c.compile(schema, root)) {
    if (error) *error = *e;
    return make_error(e->unsupported ? ErrorCode::unsupported : ErrorCode::invalid_argument, e->message);
  }
  return std::move(b).build(root);
}

Grammar grammar_for_any_object() {
  GrammarBuilder b;
  JsonGrammarCompiler c(b);
  const uint32_t root = c.any_object();
  return std::move(b).build(root);
}

}  // namespace memra::structured
