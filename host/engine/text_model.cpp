#include "host/engine/text_model.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "repack/checkpoint/gguf.hpp"
#include "repack/checkpoint/gguf_tokenizer.hpp"
#include "repack/format/gguf_vocab_file.hpp"
#include "repack/format/reader.hpp"

namespace memra::engine {
namespace {

namespace fs = std::filesystem;

Result<std::shared_ptr<const tokenizer::Tokenizer>> from_embedded(const gguf::EmbeddedTokenizer& e);

Result<std::shared_ptr<const tokenizer::Tokenizer>> gguf_tokenizer(const std::string& path) {
  gguf::OpenOptions opts;
  opts.require_dequantizable = false;
  auto file = gguf::File::open(path, opts);
  if (!file) return file.error();
  auto embedded = gguf::read_tokenizer(*file);
  if (!embedded) return embedded.error();
  return from_embedded(*embedded);
}

Result<std::shared_ptr<const tokenizer::Tokenizer>> from_embedded(const gguf::EmbeddedTokenizer& e) {
  const gguf::EmbeddedTokenizer* embedded = &e;
  tokenizer::GgufVocab v;
  v.model = embedded->model;
  v.pre = embedded->pre;
  v.tokens = embedded->tokens;
  v.merges = embedded->merges;
  v.scores = embedded->scores;
  for (int32_t t : embedded->token_types) v.token_types.push_back(static_cast<tokenizer::TokenType>(t));
  auto id = [](const std::optional<int64_t>& x) -> std::optional<tokenizer::TokenId> {
    if (!x) return std::nullopt;
    return static_cast<tokenizer::TokenId>(*x);
  };
  v.bos_id = id(embedded->bos_id);
  v.eos_id = id(embedded->eos_id);
  v.unk_id = id(embedded->unk_id);
  v.pad_id = id(embedded->pad_id);
  v.add_bos = embedded->add_bos;
  v.add_eos = embedded->add_eos;
  v.add_space_prefix = embedded->add_space_prefix;
  v.chat_template = embedded->chat_template;
  return tokenizer::Tokenizer::from_gguf_vocab(v);
}

}  // namespace

Result<std::string> TextModel::render_chat(const nlohmann::ordered_json& context) const {
  if (!chat_template) return make_error(ErrorCode::unsupported, "this model ships no chat template; use a plain prompt");
  nlohmann::ordered_json ctx = context;
  auto text_of = [&](const std::optional<tokenizer::TokenId>& t) {
    return t ? std::string(tokenizer->token_text(*t)) : std::string();
  };
  if (!ctx.contains("bos_token")) ctx["bos_token"] = text_of(tokenizer->bos_id());
  if (!ctx.contains("eos_token")) ctx["eos_token"] = text_of(tokenizer->eos_id());
  if (!ctx.contains("add_generation_prompt")) ctx["add_generation_prompt"] = true;
  return chat_template->render(ctx);
}

Result<std::shared_ptr<const tokenizer::Tokenizer>> load_tokenizer(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) {
    // A .memra repack of a GGUF keeps the embedded vocabulary as tokenizer.gguf.json.
    if (!fs::exists(p / "tokenizer.json") && format::is_memra_dir(p)) {
      auto embedded = format::read_gguf_tokenizer(p);
      if (!embedded) return embedded.error();
      return from_embedded(*embedded);
    }
    if (!fs::exists(p / "tokenizer.json"))
      return make_error(ErrorCode::not_found, path + " has no tokenizer.json; memra needs the model's tokenizer next to its weights");
    return tokenizer::Tokenizer::from_hf_dir(p);
  }
  if (!fs::is_regular_file(p, ec)) return make_error(ErrorCode::not_found, path + " does not exist");
  if (p.extension() == ".json") {
    const fs::path config = p.parent_path() / "tokenizer_config.json";
    return tokenizer::Tokenizer::from_hf_files(p, fs::exists(config) ? config : fs::path());
  }
  return gguf_tokenizer(path);
}

Result<chat_template::Template> load_chat_template_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::not_found, path + " cannot be read");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty()) return make_error(ErrorCode::invalid_argument, path + " is empty");
  auto tpl = chat_template::compile(text);
  if (!tpl) return make_error(tpl.error().code, path + " is not a usable chat template: " + tpl.error().message);
  return std::move(*tpl);
}

Result<TextModel> load_text_model(const std::string& path, const ModelConfig& config) {
  TextModel m;
  auto t = load_tokenizer(path);
  if (!t) return t.error();
  m.tokenizer = std::move(*t);
  if (!m.tokenizer->chat_template().empty()) {
    auto tpl = chat_template::compile(m.tokenizer->chat_template());
    if (!tpl) return make_error(tpl.error().code, "the model's chat template cannot be used: " + tpl.error().message);
    m.chat_template = std::move(*tpl);
  }
  for (int64_t id : config.eos_token_ids) m.stop_ids.push_back(static_cast<int32_t>(id));
  if (auto eos = m.tokenizer->eos_id()) m.stop_ids.push_back(*eos);
  std::sort(m.stop_ids.begin(), m.stop_ids.end());
  m.stop_ids.erase(std::unique(m.stop_ids.begin(), m.stop_ids.end()), m.stop_ids.end());
  return m;
}

}  // namespace memra::engine
