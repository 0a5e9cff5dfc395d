// memra-tokenize — how a model tokenizes text, and how its chat template renders a
// conversation. Prints JSON on stdout; errors on stderr (exit 1), usage errors exit 2.
//
//   memra-tokenize PATH --text "Hello world"
//   memra-tokenize PATH --file prompt.txt --ids-only
//   memra-tokenize PATH --chat-json chat.json      ({"messages": [...], "tools": [...], ...})
//
// PATH: a model directory (Hugging Face or .memra), a tokenizer.json, or a .gguf.
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "host/engine/text_model.hpp"

namespace {

const char kUsage[] =
    "usage: memra-tokenize PATH (--text TEXT | --file FILE | --chat-json FILE) [--ids-only] [--no-special]\n"
    "\n"
    "Prints the token ids of TEXT (or of FILE's contents) as JSON: {\"ids\": [...], \"count\": N, \"tokens\": [...]}.\n"
    "With --chat-json FILE (a JSON object with \"messages\" and optional \"tools\", \"add_generation_prompt\"\n"
    "(default true), \"enable_thinking\", ...), renders the model's chat template and prints\n"
    "{\"prompt\": TEXT, \"ids\": [...], \"count\": N}.\n"
    "\n"
    "  PATH          model directory (Hugging Face or .memra), tokenizer.json, or .gguf\n"
    "  --text TEXT   the text to tokenize\n"
    "  --file FILE   read the text from FILE (bytes as they are)\n"
    "  --chat-json F render and tokenize the conversation in F\n"
    "  --ids-only    print only the ids array\n"
    "  --no-special  do not add BOS/EOS (the post-processor); special-token strings in the text\n"
    "                are still matched as special tokens\n"
    "  --help        this text\n";

int usage(const std::string& why) {
  std::cerr << "memra-tokenize: " << why << "\n\n" << kUsage;
  return 2;
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream s;
  s << f.rdbuf();
  out = s.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, text, file, chat;
  bool have_text = false, ids_only = false, special = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)name;
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--text") {
      const char* v = value("--text");
      if (!v) return usage("--text needs a value");
      text = v;
      have_text = true;
    } else if (a == "--file") {
      const char* v = value("--file");
      if (!v) return usage("--file needs a value");
      file = v;
    } else if (a == "--chat-json") {
      const char* v = value("--chat-json");
      if (!v) return usage("--chat-json needs a value");
      chat = v;
    } else if (a == "--ids-only") {
      ids_only = true;
    } else if (a == "--no-special") {
      special = false;
    } else if (!a.empty() && a[0] == '-') {
      return usage("unknown option " + a);
    } else if (path.empty()) {
      path = a;
    } else {
      return usage("give one PATH");
    }
  }
  if (path.empty()) return usage("give a PATH (model directory, tokenizer.json or .gguf)");
  if (int(have_text) + int(!file.empty()) + int(!chat.empty()) != 1)
    return usage("give exactly one of --text, --file, --chat-json");

  auto tok = memra::engine::load_tokenizer(path);
  if (!tok) {
    std::cerr << "memra-tokenize: " << tok.error().message << "\n";
    return 1;
  }
  nlohmann::ordered_json out;
  std::vector<memra::tokenizer::TokenId> ids;
  if (!chat.empty()) {
    std::string body;
    if (!read_file(chat, body)) {
      std::cerr << "memra-tokenize: cannot read " << chat << "\n";
      return 1;
    }
    nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(body, nullptr, false);
    if (ctx.is_discarded() || !ctx.is_object() || !ctx.contains("messages")) {
      std::cerr << "memra-tokenize: " << chat << " is not a JSON object with \"messages\"\n";
      return 1;
    }
    memra::engine::TextModel m;
    m.tokenizer = *tok;
    if ((*tok)->chat_template().empty()) {
      std::cerr << "memra-tokenize: " << path << " has no chat template\n";
      return 1;
    }
    auto tpl = memra::chat_template::compile((*tok)->chat_template());
    if (!tpl) {
      std::cerr << "memra-tokenize: the chat template cannot be used: " << tpl.error().message << "\n";
      return 1;
    }
    m.chat_template = std::move(*tpl);
    auto rendered = m.render_chat(ctx);
    if (!rendered) {
      std::cerr << "memra-tokenize: " << rendered.error().message << "\n";
      return 1;
    }
    // Chat templates write BOS themselves: tokenize without the post-processor, as
    // transformers' apply_chat_template(tokenize=True) does.
    ids = (*tok)->encode(*rendered, false);
    out["prompt"] = *rendered;
  } else {
    if (!file.empty() && !read_file(file, text)) {
      std::cerr << "memra-tokenize: cannot read " << file << "\n";
      return 1;
    }
    ids = (*tok)->encode(text, special);
  }
  if (ids_only) {
    std::cout << nlohmann::json(ids).dump() << "\n";
    return 0;
  }
  out["ids"] = ids;
  out["count"] = ids.size();
  if (chat.empty()) {
    nlohmann::ordered_json pieces = nlohmann::ordered_json::array();
    for (auto id : ids) pieces.push_back(std::string((*tok)->token_text(id)));
    out["tokens"] = pieces;
  }
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}
