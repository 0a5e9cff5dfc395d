// GGUF-style vocabulary (tokenizer.ggml.*) -> TokenizerSpec, mirroring what the Hugging Face tokenizer.json
// of the same model does:
//   "gpt2":  byte-level BPE; the split regex (and NFC for Qwen2) chosen by tokenizer.ggml.pre.
//   "llama": SentencePiece BPE: ' ' -> U+2581 (with a U+2581 prefix when add_space_prefix), byte fallback,
//            merges from tokenizer.ggml.merges or, when absent, ranked by the score of the merged token.
// Control tokens become special added tokens; user-defined tokens non-special added tokens.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "host/tokenizer/tokenizer_impl.hpp"
#include "host/tokenizer/utf8.hpp"

namespace memra::tokenizer::detail {
namespace {

constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

TokenType type_at(const GgufVocab& v, std::size_t i) {
  return i < v.token_types.size() ? v.token_types[i] : TokenType::normal;
}

Status set_pre_tokenizer(const GgufVocab& v, TokenizerSpec& spec) {
  PreTokenizerStep byte_level;
  byte_level.kind = PreTokenizerStep::Kind::byte_level;
  byte_level.add_prefix_space = false;
  byte_level.use_regex = false;
  auto split = [&](std::string_view pattern) {
    PreTokenizerStep s;
    s.kind = PreTokenizerStep::Kind::split;
    s.pattern = Pattern{true, std::string(pattern)};
    s.behavior = SplitBehavior::isolated;
    spec.pre_tokenizers.push_back(s);
  };
  const std::string& pre = v.pre;
  if (pre == "qwen2") {
    NormalizerStep nfc;
    nfc.kind = NormalizerStep::Kind::nfc;
    spec.normalizers.push_back(nfc);
    split(kQwen2Pattern);
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    split(kLlama3Pattern);
    spec.model.ignore_merges = true;
  } else if (pre == "gpt-2" || pre == "gpt2" || pre == "default" || pre.empty()) {
    byte_level.use_regex = true;  // the GPT-2 pattern
  } else {
    return make_error(ErrorCode::unsupported, "GGUF tokenizer.ggml.pre \"" + pre +
                                                  "\" is not known (known: qwen2, llama-bpe, gpt-2/default)");
  }
  spec.pre_tokenizers.push_back(byte_level);
  return {};
}

// SentencePiece BPE without a merges list: every split of a token into two vocabulary tokens is a merge,
// ranked by the merged token's score (higher first; equal scores share a rank, so position breaks ties).
void merges_from_scores(const GgufVocab& v, TokenizerSpec& spec) {
  std::unordered_map<std::string_view, TokenId> ids;
  ids.reserve(v.tokens.size());
  for (std::size_t i = 0; i < v.tokens.size(); ++i) {
    auto t = type_at(v, i);
    if (t == TokenType::normal || t == TokenType::user_defined || t == TokenType::undefined)
      ids.emplace(v.tokens[i], static_cast<TokenId>(i));
  }
  std::vector<float> distinct;
  struct Candidate {
    float score;
    std::size_t token;
    std::size_t split;
  };
  std::vector<Candidate> cands;
  for (std::size_t i = 0; i < v.tokens.size(); ++i) {
    auto t = type_at(v, i);
    // Merge results: normal and user-defined pieces (llama.cpp merges into any piece it finds by text; the
    // HF conversion of SentencePiece models keeps user-defined pieces such as runs of U+2581 in merges).
    if (t != TokenType::normal && t != TokenType::undefined && t != TokenType::user_defined) continue;
    const std::string& s = v.tokens[i];
    float score = i < v.scores.size() ? v.scores[i] : 0.0f;
    std::size_t pos = 0;
    next_codepoint(s, pos);
    while (pos < s.size()) {
      std::string_view left(s.data(), pos), right(s.data() + pos, s.size() - pos);
      if (ids.count(left) && ids.count(right)) cands.push_back({score, i, pos});
      next_codepoint(s, pos);
    }
  }
  std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  int rank = -1;
  float prev = 0;
  for (std::size_t k = 0; k < cands.size(); ++k) {
    if (k == 0 || cands[k].score != prev) ++rank;
    prev = cands[k].score;
    const std::string& s = v.tokens[cands[k].token];
    spec.model.merges.emplace_back(s.substr(0, cands[k].split), s.substr(cands[k].split));
    spec.model.merge_ranks.push_back(rank);
  }
}

}  // namespace

Result<TokenizerSpec> spec_from_gguf_vocab(const GgufVocab& v) {
  TokenizerSpec spec;
  const bool spm = v.model == "llama";
  if (!spm && v.model != "gpt2")
    return make_error(ErrorCode::unsupported, "GGUF tokenizer.ggml.model \"" + v.model +
                                                  "\" is not supported (supported: gpt2, llama)");
  if (v.tokens.empty()) return make_error(ErrorCode::invalid_argument, "GGUF vocabulary has no tokens");
  if (!v.token_types.empty() && v.token_types.size() != v.tokens.size())
    return make_error(ErrorCode::invalid_argument, "GGUF token_type has " + std::to_string(v.token_types.size()) +
                                                       " entries for " + std::to_string(v.tokens.size()) + " tokens");
  if (!v.scores.empty() && v.scores.size() != v.tokens.size())
    return make_error(ErrorCode::invalid_argument, "GGUF scores has " + std::to_string(v.scores.size()) +
                                                       " entries for " + std::to_string(v.tokens.size()) + " tokens");

  std::vector<std::string> texts = v.tokens;
  if (spm) {
    // GGUF converters store SentencePiece user-defined pieces "pre-normalized" (U+2581 -> ' '); put the
    // U+2581 back so they match and merge as in the Hugging Face tokenizer.
    for (std::size_t i = 0; i < texts.size(); ++i) {
      if (type_at(v, i) != TokenType::user_defined || texts[i].find(' ') == std::string::npos) continue;
      std::string restored;
      for (char c : texts[i]) {
        if (c == ' ') restored += kSpace;
        else restored += c;
      }
      texts[i] = std::move(restored);
    }
  }

  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto t = type_at(v, i);
    auto id = static_cast<TokenId>(i);
    if (t == TokenType::control || t == TokenType::user_defined) {
      AddedTokenSpec a;
      a.id = id;
      a.content = texts[i];
      a.special = t == TokenType::control;
      a.normalized = false;
      spec.added_tokens.push_back(std::move(a));
      if (t == TokenType::control && !spm) continue;  // byte-level models keep control tokens out of the model
    }
    spec.model.vocab.emplace_back(texts[i], id);
  }

  for (std::size_t i = 0; i < v.merges.size(); ++i) {
    const std::string& m = v.merges[i];
    std::size_t sp = m.find(' ', 1);
    if (sp == std::string::npos)
      return make_error(ErrorCode::invalid_argument, "GGUF merge #" + std::to_string(i) + " \"" + m + "\" has no space");
    spec.model.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }

  auto in_range = [&](std::optional<TokenId> id) -> std::optional<TokenId> {
    if (id && *id >= 0 && static_cast<std::size_t>(*id) < v.tokens.size()) return id;
    return std::nullopt;
  };
  spec.bos_id = in_range(v.bos_id);
  spec.eos_id = in_range(v.eos_id);
  spec.pad_id = in_range(v.pad_id);
  spec.unk_id = in_range(v.unk_id);
  if (!spec.unk_id)
    for (std::size_t i = 0; i < v.token_types.size(); ++i)
      if (v.token_types[i] == TokenType::unknown) {
        spec.unk_id = static_cast<TokenId>(i);
        break;
      }
  if (spec.unk_id) spec.model.unk_token = texts[*spec.unk_id];

  if (spm) {
    bool prefix = v.add_space_prefix.value_or(true);
    if (prefix) {
      NormalizerStep p;
      p.kind = NormalizerStep::Kind::prepend;
      p.content = std::string(kSpace);
      spec.normalizers.push_back(p);
    }
    NormalizerStep r;
    r.kind = NormalizerStep::Kind::replace;
    r.pattern = Pattern{false, " "};
    r.content = std::string(kSpace);
    spec.normalizers.push_back(r);
    spec.model.byte_fallback = true;
    spec.model.fuse_unk = true;
    if (v.merges.empty()) {
      GgufVocab restored = v;
      restored.tokens = texts;
      merges_from_scores(restored, spec);
    }

    DecoderStep rep;
    rep.kind = DecoderStep::Kind::replace;
    rep.pattern = Pattern{false, std::string(kSpace)};
    rep.content = " ";
    spec.decoders.push_back(rep);
    DecoderStep fb;
    fb.kind = DecoderStep::Kind::byte_fallback;
    spec.decoders.push_back(fb);
    DecoderStep fuse;
    fuse.kind = DecoderStep::Kind::fuse;
    spec.decoders.push_back(fuse);
    if (prefix) {
      DecoderStep strip;
      strip.kind = DecoderStep::Kind::strip;
      strip.content = " ";
      strip.start = 1;
      spec.decoders.push_back(strip);
    }
  } else {
    MEMRA_TRY(set_pre_tokenizer(v, spec));
    DecoderStep bl;
    bl.kind = DecoderStep::Kind::byte_level;
    spec.decoders.push_back(bl);
  }

  if (v.add_bos.value_or(spm) && spec.bos_id) spec.prefix_ids.push_back(*spec.bos_id);
  if (v.add_eos.value_or(false) && spec.eos_id) spec.suffix_ids.push_back(*spec.eos_id);
  spec.chat_template = v.chat_template;
  return spec;
}

}  // namespace memra::tokenizer::detail
