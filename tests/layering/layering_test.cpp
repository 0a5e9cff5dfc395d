// The module boundaries of docs/ARCHITECTURE.md, checked on the source tree:
// - the host has no per-architecture knowledge: no architecture a family plugin
//   serves (nor any Hugging Face model class) is named in host/ or repack/ code;
// - repack/ and registry/ include nothing from host/, core/ nothing from the modules
//   above it (memra-repack and the registry link no engine);
// - the engine and the server run on the one Backend interface (host/backend/
//   backend.hpp): they include no backend's internals and branch on no backend kind;
// - a weight scheme lives in its quant plugin: the backends and the shared kernels name
//   none of memra's block schemes (code and comments, as issue #40's check reads them).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/build_plugins.hpp"

namespace {

namespace fs = std::filesystem;
const fs::path kRoot = MEMRA_SOURCE_ROOT;

bool is_code(const fs::path& p) {
  static const std::set<std::string> kExt = {".cpp", ".hpp", ".h", ".c", ".cu", ".cuh"};
  return kExt.count(p.extension().string()) > 0;
}

std::vector<fs::path> code_files(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(kRoot / dir))
    if (e.is_regular_file() && is_code(e.path())) out.push_back(e.path());
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The text without comments (a // inside a string literal ends a line early, which
// only ever hides text, so a name can still not slip through a comment).
std::string code_only(const std::string& text) {
  static const std::regex kBlock(R"(/\*[\s\S]*?\*/)"), kLine(R"(//[^\n]*)");
  return std::regex_replace(std::regex_replace(text, kBlock, " "), kLine, "");
}

std::string rel(const fs::path& p) { return fs::relative(p, kRoot).string(); }

// Every architecture the build's family plugins serve, plus the shape of any HF class.
TEST(Layering, HostAndRepackNameNoArchitecture) {
  std::set<std::string> names;
  for (const auto& p : memra::testing::build_plugins().plugins())
    if (p.kind == memra::plugins::PluginKind::family)
      for (const std::string& h : p.handles) names.insert(h);
  ASSERT_FALSE(names.empty()) << "no family plugin in this build to take the architecture names from";
  static const std::regex kHfClass(R"(\b[A-Z][A-Za-z0-9]*For(CausalLM|ConditionalGeneration)\b)");
  std::vector<std::string> found;
  for (const char* dir : {"host", "repack", "core"}) {
    for (const fs::path& f : code_files(dir)) {
      // GGUF's tokenizer model names ("llama": SentencePiece BPE; "qwen2": a pre-tokenizer)
      // name tokenizers, not model architectures.
      const bool tokenizer = rel(f).rfind("host/tokenizer/", 0) == 0;
      const std::string code = code_only(read(f));
      std::smatch m;
      if (std::regex_search(code, m, kHfClass)) found.push_back(rel(f) + ": " + m.str());
      for (const std::string& n : names)
        if (!tokenizer && code.find("\"" + n + "\"") != std::string::npos) found.push_back(rel(f) + ": \"" + n + "\"");
    }
  }
  EXPECT_TRUE(found.empty()) << "architecture knowledge belongs in plugins/family-*; found:\n"
                             << ::testing::PrintToString(found);
}

std::vector<std::string> includes_from(const std::string& dir, const std::vector<std::string>& forbidden) {
  static const std::regex kInclude(R"(#include\s+"([a-z_]+)/)");
  std::vector<std::string> found;
  for (const fs::path& f : code_files(dir)) {
    const std::string code = code_only(read(f));
    for (std::sregex_iterator it(code.begin(), code.end(), kInclude), end; it != end; ++it)
      for (const std::string& bad : forbidden)
        if ((*it)[1] == bad) found.push_back(rel(f) + " includes " + bad + "/");
  }
  return found;
}

TEST(Layering, RepackAndRegistryIncludeNothingFromTheHost) {
  for (const char* dir : {"repack", "registry"}) {
    const auto found = includes_from(dir, {"host"});
    EXPECT_TRUE(found.empty()) << ::testing::PrintToString(found);
  }
}

TEST(Layering, CoreIncludesOnlyItselfAndTheSdk) {
  const auto found = includes_from("core", {"host", "repack", "registry", "kernels", "plugins"});
  EXPECT_TRUE(found.empty()) << ::testing::PrintToString(found);
}

// Everything above the backends sees backend.hpp, the pipeline builder and plugin
// kernel registration, never a backend's own headers, and names no backend kind
// outside choosing which one to open.
TEST(Layering, EngineAndServerUseOneBackendInterface) {
  static const std::regex kInternal(R"(#include\s+"host/backend/(cpu|cuda)/)");
  static const std::regex kKindBranch(R"((==|!=)\s*MEMRA_BACKEND_(CPU|CUDA)\b|MEMRA_BACKEND_(CPU|CUDA)\s*(==|!=))");
  std::vector<std::string> found;
  for (const char* dir : {"host/engine", "host/server"}) {
    for (const fs::path& f : code_files(dir)) {
      const std::string code = code_only(read(f));
      std::smatch m;
      if (std::regex_search(code, m, kInternal)) found.push_back(rel(f) + ": " + m.str());
      if (std::regex_search(code, m, kKindBranch)) found.push_back(rel(f) + ": branches on " + m.str());
    }
  }
  EXPECT_TRUE(found.empty()) << "use backend::Backend (host/backend/backend.hpp); found:\n" << ::testing::PrintToString(found);
}

// A family's concepts live in its plugin: the host's types, kernels and repack name no
// recurrent-layer (Gated DeltaNet) concept and no hybrid architecture, so a hybrid family is
// a plugin addition (its config keys pass through ModelConfig::family_json unread).
TEST(Layering, NoFamilyConceptOutsidePlugins) {
  static const std::regex kConcept(R"(gated_?delta|delta_?rule|deltanet|linear_(attention|attn|conv|num|key|value)|qwen3_?5|qwen3_?next)",
                                   std::regex::icase);
  std::vector<std::string> found;
  for (const char* dir : {"host", "kernels", "repack", "core", "registry"}) {
    for (const fs::path& f : code_files(dir)) {
      const std::string r = rel(f);
      // Tools, the tokenizer (tokenizer names) and tests are outside the rule.
      if (r.rfind("host/tools/", 0) == 0 || r.rfind("host/tokenizer/", 0) == 0 || r.find("test") != std::string::npos) continue;
      const std::string code = code_only(read(f));
      std::smatch m;
      if (std::regex_search(code, m, kConcept)) found.push_back(r + ": " + m.str());
    }
  }
  EXPECT_TRUE(found.empty()) << "a family's concepts belong in plugins/family-*; found:\n" << ::testing::PrintToString(found);
}

// Gemma is family-gemma's (issue #42): the engine, the backends, the kernels, repack, core and
// the registry's code name it nowhere outside comments (the tokenizer and the tool-call parser
// may name its formats; they are outside these folders or the rule).
TEST(Layering, NoGemmaOutsideItsPlugin) {
  static const std::regex kGemma(R"(gemma)", std::regex::icase);
  std::vector<std::string> found;
  for (const char* dir : {"host/engine", "host/backend", "kernels", "repack", "core", "registry"}) {
    for (const fs::path& f : code_files(dir)) {
      const std::string r = rel(f);
      if (r.find("test") != std::string::npos) continue;
      const std::string code = code_only(read(f));
      std::smatch m;
      if (std::regex_search(code, m, kGemma)) found.push_back(r + ": " + m.str());
    }
  }
  EXPECT_TRUE(found.empty()) << "Gemma's knowledge belongs in plugins/family-gemma; found:\n" << ::testing::PrintToString(found);
}

// Schemes are plugins (docs/ARCHITECTURE.md, "Kernel registry"): every scheme's kernels,
// reference and tables are in plugins/quant-*, so host/backend (the CPU, CUDA and pipeline
// backends), kernels/ (the shared device code) and repack/tool (memra-repack: its scheme list
// and mixes come from the plugins' scheme_info) name none of them, comments included.
TEST(Layering, NoSchemeNameOutsideItsPlugin) {
  static const std::regex kScheme(R"((^|[^A-Za-z0-9_])(q4_k|q8_0|q5_k|q6_k|iq4_xs|q4_0|nvfp4)($|[^A-Za-z0-9_]))");
  std::vector<std::string> found;
  for (const char* dir : {"host/backend", "kernels", "repack/tool"}) {
    for (const fs::path& f : code_files(dir)) {
      const std::string r = rel(f);
      if (r.find("test") != std::string::npos) continue;
      const std::string text = read(f);
      std::smatch m;
      if (std::regex_search(text, m, kScheme)) found.push_back(r + ": " + m.str(2));
    }
  }
  for (const char* file : {"kernels/CMakeLists.txt", "host/backend/cuda/CMakeLists.txt", "host/backend/CMakeLists.txt", "repack/tool/CMakeLists.txt"}) {
    const std::string text = read(kRoot / file);
    std::smatch m;
    if (std::regex_search(text, m, kScheme)) found.push_back(std::string(file) + ": " + m.str(2));
  }
  EXPECT_TRUE(found.empty()) << "a scheme's knowledge belongs in plugins/quant-<name>; found:\n" << ::testing::PrintToString(found);
}

}  // namespace
