// llama.cpp's logits for a GGUF fixture, the oracle memra's GGUF tests hold themselves to
// (built on the GPU machine against the llama.cpp tree of ../shared/anchors by
// make_gguf_fixtures.sh; not part of memra's build). One decode of the prompt with logits at
// every position, then n_gen greedy single-token decodes; writes
//   OUT            [n][vocab] f32, row i = logits after ids[0..i]
//   OUT.greedy.bin [n_gen][vocab] f32, row s = the logits that chose greedy token s
//   OUT's stem + .dump.json: ids, greedy ids, shapes, settings (compare_dumps.py's input).
// usage: llamacpp_logits MODEL.gguf IDS.txt OUT N_GPU_LAYERS N_GEN
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

static int argmax(const float* x, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s MODEL.gguf IDS.txt OUT N_GPU_LAYERS N_GEN\n", argv[0]);
    return 2;
  }
  const std::string model_path = argv[1], out = argv[3];
  const int ngl = std::atoi(argv[4]), n_gen = std::atoi(argv[5]);
  std::vector<llama_token> ids;
  {
    std::ifstream in(argv[2]);
    for (llama_token t; in >> t;) ids.push_back(t);
  }
  const int n = static_cast<int>(ids.size());
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = ngl;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n + n_gen + 16;
  cp.n_batch = cp.n_ubatch = n;
  cp.n_seq_max = 1;
  cp.flash_attn_type = ngl > 0 ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n;
  if (llama_decode(ctx, batch) != 0) return 1;
  std::vector<float> prefill(static_cast<size_t>(n) * vocab), steps;
  for (int i = 0; i < n; ++i) {
    const float* l = llama_get_logits_ith(ctx, i);
    std::copy(l, l + vocab, prefill.begin() + static_cast<long>(i) * vocab);
  }
  std::vector<int> greedy;
  std::vector<float> last(prefill.end() - vocab, prefill.end());
  for (int s = 0; s < n_gen; ++s) {
    const int tok = argmax(last.data(), vocab);
    greedy.push_back(tok);
    steps.insert(steps.end(), last.begin(), last.end());
    if (s + 1 == n_gen) break;
    llama_batch one = llama_batch_init(1, 0, 1);
    one.token[0] = tok;
    one.pos[0] = n + s;
    one.n_seq_id[0] = 1;
    one.seq_id[0][0] = 0;
    one.logits[0] = 1;
    one.n_tokens = 1;
    if (llama_decode(ctx, one) != 0) return 1;
    const float* l = llama_get_logits_ith(ctx, 0);
    last.assign(l, l + vocab);
    llama_batch_free(one);
  }
  std::ofstream(out, std::ios::binary).write(reinterpret_cast<const char*>(prefill.data()), prefill.size() * 4);
  std::ofstream(out + ".greedy.bin", std::ios::binary).write(reinterpret_cast<const char*>(steps.data()), steps.size() * 4);
  const std::string base = out.substr(out.find_last_of('/') + 1);
  std::string stem = out.substr(0, out.rfind(".logits.f32.bin"));
  std::ostringstream j;
  j << "{\n \"n_tokens\": " << n << ",\n \"n_vocab\": " << vocab << ",\n \"greedy\": [";
  for (size_t i = 0; i < greedy.size(); ++i) j << (i ? ", " : "") << greedy[i];
  const std::string gguf = model_path.substr(model_path.find_last_of('/') + 1);
  j << "],\n \"gguf\": \"" << gguf << "\",\n \"logits_file\": \"" << base << "\",\n \"greedy_logits_file\": \"" << base
    << ".greedy.bin\",\n \"n_gpu_layers\": " << ngl << ",\n \"context\": \"n_ctx=" << cp.n_ctx << ", n_batch=n_ubatch=" << n
    << ", KV f16, flash attention " << (ngl > 0 ? "on" : "off") << "\"\n}\n";
  std::ofstream(stem + ".dump.json") << j.str();
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
