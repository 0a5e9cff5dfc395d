// tokenizer.json + tokenizer_config.json -> TokenizerSpec. The only translation unit that includes
// nlohmann/json (it is slow to compile).
#include <nlohmann/json.hpp>

#include <unordered_map>

#include "host/tokenizer/tokenizer_impl.hpp"

namespace memra::tokenizer::detail {
namespace {

using json = nlohmann::json;

Error unsupported(const std::string& what) {
  return make_error(ErrorCode::unsupported,
                    "tokenizer.json: " + what + " is not supported (supported: BPE models with NFC/NFD/NFKC/NFKD, "
                    "Replace, Prepend, Strip, Lowercase normalizers; Split, ByteLevel, Metaspace, Digits, "
                    "WhitespaceSplit pre-tokenizers; ByteLevel, TemplateProcessing, Roberta/Bert post-processors)");
}

bool flag(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<bool>();
}

std::string type_of(const json& j) {
  auto it = j.find("type");
  return it == j.end() || !it->is_string() ? std::string() : it->get<std::string>();
}

Result<Pattern> pattern_of(const json& j) {
  auto it = j.find("pattern");
  if (it == j.end() || !it->is_object()) return make_error(ErrorCode::invalid_argument, "tokenizer.json: pattern missing");
  if (auto s = it->find("String"); s != it->end()) return Pattern{false, s->get<std::string>()};
  if (auto r = it->find("Regex"); r != it->end()) return Pattern{true, r->get<std::string>()};
  return make_error(ErrorCode::invalid_argument, "tokenizer.json: pattern is neither String nor Regex");
}

PrependScheme prepend_scheme_of(const json& j) {
  if (auto it = j.find("prepend_scheme"); it != j.end() && it->is_string()) {
    auto s = it->get<std::string>();
    if (s == "first") return PrependScheme::first;
    if (s == "never") return PrependScheme::never;
    return PrependScheme::always;
  }
  return flag(j, "add_prefix_space", true) ? PrependScheme::always : PrependScheme::never;
}

Status parse_normalizer(const json& j, std::vector<NormalizerStep>& out) {
  if (j.is_null()) return {};
  std::string type = type_of(j);
  NormalizerStep s;
  using K = NormalizerStep::Kind;
  if (type == "Sequence") {
    for (const auto& n : j.at("normalizers")) MEMRA_TRY(parse_normalizer(n, out));
    return {};
  }
  if (type == "NFC") s.kind = K::nfc;
  else if (type == "NFD") s.kind = K::nfd;
  else if (type == "NFKC") s.kind = K::nfkc;
  else if (type == "NFKD") s.kind = K::nfkd;
  else if (type == "Lowercase") s.kind = K::lowercase;
  else if (type == "Replace") {
    s.kind = K::replace;
    auto p = pattern_of(j);
    if (!p) return p.error();
    s.pattern = *p;
    s.content = j.at("content").get<std::string>();
  } else if (type == "Prepend") {
    s.kind = K::prepend;
    s.content = j.at("prepend").get<std::string>();
  } else if (type == "Strip") {
    s.kind = K::strip;
    s.strip_left = flag(j, "strip_left", true);
    s.strip_right = flag(j, "strip_right", true);
  } else {
    return unsupported("normalizer " + type);
  }
  out.push_back(std::move(s));
  return {};
}

Status parse_pre_tokenizer(const json& j, std::vector<PreTokenizerStep>& out) {
  if (j.is_null()) return {};
  std::string type = type_of(j);
  PreTokenizerStep s;
  using K = PreTokenizerStep::Kind;
  if (type == "Sequence") {
    for (const auto& p : j.at("pretokenizers")) MEMRA_TRY(parse_pre_tokenizer(p, out));
    return {};
  }
  if (type == "Split") {
    s.kind = K::split;
    auto p = pattern_of(j);
    if (!p) return p.error();
    s.pattern = *p;
    std::string b = j.value("behavior", std::string("Isolated"));
    if (b == "Removed") s.behavior = SplitBehavior::removed;
    else if (b == "Isolated") s.behavior = SplitBehavior::isolated;
    else if (b == "MergedWithPrevious") s.behavior = SplitBehavior::merged_with_previous;
    else if (b == "MergedWithNext") s.behavior = SplitBehavior::merged_with_next;
    else if (b == "Contiguous") s.behavior = SplitBehavior::contiguous;
    else return unsupported("Split behavior " + b);
    s.invert = flag(j, "invert", false);
  } else if (type == "ByteLevel") {
    s.kind = K::byte_level;
    s.add_prefix_space = flag(j, "add_prefix_space", true);
    s.use_regex = flag(j, "use_regex", true);
  } else if (type == "Metaspace") {
    s.kind = K::metaspace;
    s.replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    s.prepend_scheme = prepend_scheme_of(j);
    s.split = flag(j, "split", true);
  } else if (type == "Digits") {
    s.kind = K::digits;
    s.individual_digits = flag(j, "individual_digits", false);
  } else if (type == "WhitespaceSplit") {
    s.kind = K::whitespace_split;
  } else {
    return unsupported("pre-tokenizer " + type);
  }
  out.push_back(std::move(s));
  return {};
}

Status parse_decoder(const json& j, std::vector<DecoderStep>& out) {
  std::string type = type_of(j);
  DecoderStep s;
  using K = DecoderStep::Kind;
  if (type == "Sequence") {
    for (const auto& d : j.at("decoders")) MEMRA_TRY(parse_decoder(d, out));
    return {};
  }
  if (type == "ByteLevel") s.kind = K::byte_level;
  else if (type == "ByteFallback") s.kind = K::byte_fallback;
  else if (type == "Fuse") s.kind = K::fuse;
  else if (type == "Replace") {
    s.kind = K::replace;
    auto p = pattern_of(j);
    if (!p) return p.error();
    s.pattern = *p;
    s.content = j.at("content").get<std::string>();
  } else if (type == "Strip") {
    s.kind = K::strip;
    s.content = j.value("content", std::string(" "));
    s.start = j.value("start", 0);
    s.stop = j.value("stop", 0);
  } else if (type == "Metaspace") {
    s.kind = K::metaspace;
    s.replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    s.prepend_scheme = prepend_scheme_of(j);
  } else {
    return unsupported("decoder " + type);
  }
  out.push_back(std::move(s));
  return {};
}

// Text -> id for the few names the post-processor and tokenizer_config use: added tokens first, then the
// model vocabulary (a linear scan: a handful of lookups does not justify a map of the whole vocabulary).
struct IdLookup {
  const TokenizerSpec& spec;
  std::optional<TokenId> find(const std::string& text) const {
    for (const auto& t : spec.added_tokens)
      if (t.content == text) return t.id;
    for (const auto& [v, id] : spec.model.vocab)
      if (v == text) return id;
    return std::nullopt;
  }
};

Status parse_post_processor(const json& j, const IdLookup& ids, TokenizerSpec& spec) {
  if (j.is_null()) return {};
  std::string type = type_of(j);
  if (type == "ByteLevel") return {};
  if (type == "Sequence") {
    for (const auto& p : j.at("processors")) MEMRA_TRY(parse_post_processor(p, ids, spec));
    return {};
  }
  if (type == "TemplateProcessing") {
    const json& specials = j.contains("special_tokens") ? j.at("special_tokens") : json::object();
    bool seen_a = false;
    for (const auto& piece : j.at("single")) {
      if (piece.contains("Sequence")) {
        seen_a = true;
        continue;
      }
      if (!piece.contains("SpecialToken")) continue;
      std::string name = piece.at("SpecialToken").at("id").get<std::string>();
      std::vector<TokenId> piece_ids;
      if (auto it = specials.find(name); it != specials.end()) {
        for (const auto& id : it->at("ids")) piece_ids.push_back(id.get<TokenId>());
      } else if (auto f = ids.find(name)) {
        piece_ids.push_back(*f);
      } else {
        return make_error(ErrorCode::invalid_argument,
                          "tokenizer.json: TemplateProcessing uses unknown special token " + name);
      }
      auto& dst = seen_a ? spec.suffix_ids : spec.prefix_ids;
      dst.insert(dst.end(), piece_ids.begin(), piece_ids.end());
    }
    return {};
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    spec.prefix_ids.push_back(j.at("cls").at(1).get<TokenId>());
    spec.suffix_ids.push_back(j.at("sep").at(1).get<TokenId>());
    return {};
  }
  return unsupported("post-processor " + type);
}

// A tokenizer_config token field: "text", {"content": "text", ...} or null.
std::optional<std::string> config_token(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content")) return it->at("content").get<std::string>();
  return std::nullopt;
}

// SAX handler building a DOM of everything except model.vocab and model.merges, which it stores directly.
class DomWithCapture : public nlohmann::json_sax<json> {
 public:
  explicit DomWithCapture(BpeSpec& model) : model_(model) {}
  json root;
  std::string error;

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::vocab) {
      model_.vocab.emplace_back(std::move(vocab_key_), static_cast<TokenId>(v));
      return true;
    }
    return value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::vocab) {
      model_.vocab.emplace_back(std::move(vocab_key_), static_cast<TokenId>(v));
      return true;
    }
    return value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override {
    if (mode_ != Mode::dom) return fail("unexpected number in model.vocab/merges");
    return value(json(v));
  }
  bool string(string_t& v) override {
    if (mode_ == Mode::merges) {
      std::size_t sp = v.find(' ', 1);
      if (sp == std::string::npos) return fail("merge \"" + v + "\" has no space");
      model_.merges.emplace_back(v.substr(0, sp), v.substr(sp + 1));
      return true;
    }
    if (mode_ == Mode::merge_pair) {
      pair_.push_back(std::move(v));
      return true;
    }
    if (mode_ == Mode::vocab) return fail("string value in model.vocab");
    return value(json(std::move(v)));
  }
  bool binary(binary_t&) override { return fail("binary value"); }
  bool start_object(std::size_t) override {
    if (mode_ != Mode::dom) return fail("object inside model.vocab/merges");
    if (at_model() && key_ == "vocab") {
      mode_ = Mode::vocab;
      return true;
    }
    return open(json::object());
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::vocab) vocab_key_ = std::move(k);
    else key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::vocab) {
      mode_ = Mode::dom;
      return true;
    }
    return close();
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::merges) {
      mode_ = Mode::merge_pair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::dom) return fail("nested array in model.merges");
    if (at_model() && key_ == "merges") {
      mode_ = Mode::merges;
      return true;
    }
    return open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::merge_pair) {
      if (pair_.size() != 2) return fail("a merge is not a pair of strings");
      model_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::merges;
      return true;
    }
    if (mode_ == Mode::merges) {
      mode_ = Mode::dom;
      return true;
    }
    return close();
  }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& e) override {
    error = "at byte " + std::to_string(pos) + ": " + e.what();
    return false;
  }

 private:
  enum class Mode { dom, vocab, merges, merge_pair };
  bool fail(std::string why) {
    error = std::move(why);
    return false;
  }
  // The container being filled is the root object's "model" member.
  bool at_model() const { return stack_.size() == 2 && keys_.size() == 2 && keys_[1] == "model"; }
  json* place(json&& v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }
  bool value(json&& v) {
    place(std::move(v));
    return true;
  }
  bool open(json&& container) {
    std::string k = !stack_.empty() && stack_.back()->is_object() ? key_ : std::string();
    stack_.push_back(place(std::move(container)));
    keys_.push_back(std::move(k));
    return true;
  }
  bool close() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }

  BpeSpec& model_;
  Mode mode_ = Mode::dom;
  std::vector<json*> stack_;
  std::vector<std::string> keys_;  // the key each open container was stored under
  std::string key_;
  std::string vocab_key_;
  std::vector<std::string> pair_;
};

Status parse(const json& root, const json& config, TokenizerSpec& spec) {

  // ---- model
  const json& model = root.at("model");
  std::string model_type = type_of(model);
  if (model_type.empty() && model.contains("merges")) model_type = "BPE";
  if (model_type != "BPE") return unsupported("model type " + (model_type.empty() ? "(none)" : model_type));
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && it->is_string() && !it->get_ref<const std::string&>().empty())
      return unsupported(std::string("BPE ") + key);
  }
  // model.vocab and model.merges were captured by the SAX handler.
  if (spec.model.vocab.empty()) return make_error(ErrorCode::invalid_argument, "tokenizer.json: model.vocab is missing or empty");
  if (auto it = model.find("unk_token"); it != model.end() && it->is_string()) spec.model.unk_token = it->get<std::string>();
  spec.model.byte_fallback = flag(model, "byte_fallback", false);
  spec.model.fuse_unk = flag(model, "fuse_unk", false);
  spec.model.ignore_merges = flag(model, "ignore_merges", false);

  // ---- added tokens (tokenizer_config's added_tokens_decoder may add or override flags)
  std::unordered_map<TokenId, std::size_t> added_index;
  if (auto it = root.find("added_tokens"); it != root.end() && it->is_array()) {
    for (const auto& a : *it) {
      AddedTokenSpec t;
      t.id = a.at("id").get<TokenId>();
      t.content = a.at("content").get<std::string>();
      t.special = flag(a, "special", false);
      t.lstrip = flag(a, "lstrip", false);
      t.rstrip = flag(a, "rstrip", false);
      t.normalized = flag(a, "normalized", !t.special);
      t.single_word = flag(a, "single_word", false);
      added_index[t.id] = spec.added_tokens.size();
      spec.added_tokens.push_back(std::move(t));
    }
  }
  if (auto it = config.find("added_tokens_decoder"); it != config.end() && it->is_object()) {
    for (auto e = it->begin(); e != it->end(); ++e) {
      TokenId id = static_cast<TokenId>(std::stol(e.key()));
      const json& a = e.value();
      AddedTokenSpec t;
      t.id = id;
      t.content = a.at("content").get<std::string>();
      t.special = flag(a, "special", false);
      t.lstrip = flag(a, "lstrip", false);
      t.rstrip = flag(a, "rstrip", false);
      t.normalized = flag(a, "normalized", !t.special);
      t.single_word = flag(a, "single_word", false);
      if (auto f = added_index.find(id); f != added_index.end()) spec.added_tokens[f->second] = std::move(t);
      else {
        added_index[id] = spec.added_tokens.size();
        spec.added_tokens.push_back(std::move(t));
      }
    }
  }

  IdLookup ids{spec};
  auto lookup = [&](const std::optional<std::string>& text) -> std::optional<TokenId> {
    return text ? ids.find(*text) : std::nullopt;
  };

  // ---- pipeline
  if (auto it = root.find("normalizer"); it != root.end()) MEMRA_TRY(parse_normalizer(*it, spec.normalizers));
  if (auto it = root.find("pre_tokenizer"); it != root.end())
    MEMRA_TRY(parse_pre_tokenizer(*it, spec.pre_tokenizers));
  if (auto it = root.find("post_processor"); it != root.end()) MEMRA_TRY(parse_post_processor(*it, ids, spec));
  if (auto it = root.find("decoder"); it != root.end() && !it->is_null()) {
    MEMRA_TRY(parse_decoder(*it, spec.decoders));
  } else {
    spec.has_decoder = false;
  }

  // ---- tokenizer_config.json
  spec.bos_id = lookup(config_token(config, "bos_token"));
  spec.eos_id = lookup(config_token(config, "eos_token"));
  spec.pad_id = lookup(config_token(config, "pad_token"));
  spec.unk_id = lookup(config_token(config, "unk_token"));
  if (!spec.unk_id) spec.unk_id = lookup(spec.model.unk_token);
  // transformers >= 4.45 defaults clean_up_tokenization_spaces to false when the key is absent.
  spec.clean_up_tokenization_spaces = flag(config, "clean_up_tokenization_spaces", false);
  if (auto it = config.find("additional_special_tokens"); it != config.end() && it->is_array()) {
    for (const auto& a : *it) {
      std::optional<std::string> text;
      if (a.is_string()) text = a.get<std::string>();
      else if (a.is_object() && a.contains("content")) text = a.at("content").get<std::string>();
      if (auto id = lookup(text)) spec.extra_special_ids.push_back(*id);
    }
  }
  if (auto it = config.find("chat_template"); it != config.end()) {
    if (it->is_string()) {
      spec.chat_template = it->get<std::string>();
    } else if (it->is_array()) {
      for (const auto& t : *it)
        if (t.value("name", std::string()) == "default") spec.chat_template = t.value("template", std::string());
      if (spec.chat_template.empty() && !it->empty()) spec.chat_template = it->at(0).value("template", std::string());
    }
  }
  // transformers' Llama/Gemma fast tokenizers rebuild the post-processor from add_bos_token/add_eos_token
  // (defaults true/false) whatever tokenizer.json says.
  std::string cls = config.value("tokenizer_class", std::string());
  if (cls.size() > 4 && cls.compare(cls.size() - 4, 4, "Fast") == 0) cls.resize(cls.size() - 4);
  if (cls == "LlamaTokenizer" || cls == "GemmaTokenizer" || cls == "CodeLlamaTokenizer") {
    spec.prefix_ids.clear();
    spec.suffix_ids.clear();
    if (flag(config, "add_bos_token", true) && spec.bos_id) spec.prefix_ids.push_back(*spec.bos_id);
    if (flag(config, "add_eos_token", false) && spec.eos_id) spec.suffix_ids.push_back(*spec.eos_id);
  }
  return {};
}

}  // namespace

Result<TokenizerSpec> spec_from_hf_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json) {
  // SAX parse: model.vocab and model.merges (most of the file) go straight into the spec; the rest is
  // small and becomes a DOM. A full DOM parse of a 10 MB tokenizer.json costs several times more.
  TokenizerSpec spec;
  DomWithCapture handler(spec.model);
  bool ok = json::sax_parse(tokenizer_json.begin(), tokenizer_json.end(), &handler);
  if (!ok || !handler.root.is_object())
    return make_error(ErrorCode::corrupt, "tokenizer.json is not valid JSON (" + handler.error +
                                              "); is this a Hugging Face tokenizer.json?");
  json config = json::object();
  if (!tokenizer_config_json.empty()) {
    config = json::parse(tokenizer_config_json.begin(), tokenizer_config_json.end(), nullptr, false);
    if (config.is_discarded() || !config.is_object())
      return make_error(ErrorCode::corrupt, "tokenizer_config.json is not a JSON object");
  }
  try {
    MEMRA_TRY(parse(handler.root, config, spec));
    return spec;
  } catch (const std::exception& e) {
    return make_error(ErrorCode::corrupt, std::string("tokenizer.json has an unexpected shape: ") + e.what());
  }
}

}  // namespace memra::tokenizer::detail
