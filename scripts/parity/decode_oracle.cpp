// Decode oracle: runs llama.cpp (public llama.h API, CPU, default context: flash attention
// auto, f16 KV cache) on a GGUF: the prompt in one batch, then N greedy steps one token at
// a time. Prints one JSON object: the prompt's ids, the greedy ids, their printed bytes
// (token_to_piece with special=false, as llama-completion prints them: per token and
// concatenated), and
// for the last prompt position and every decode step the top-16 logits plus a systematic
// sample (every 151st id), so a test can compare logits along the whole greedy path
// (prompt batches, one-row decode, and decode past 256 positions where llama.cpp splits the
// KV range over its threads).
//   decode_oracle MODEL.gguf PROMPT_FILE N_PREDICT THREADS N_CTX
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "llama.h"

namespace {

void print_logits(const float* lg, int nv) {
  std::vector<int> idx(static_cast<std::size_t>(nv));
  std::iota(idx.begin(), idx.end(), 0);
  const int k = std::min(16, nv);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) { return lg[a] > lg[b]; });
  std::printf("{\"top\": [");
  for (int i = 0; i < k; ++i) std::printf("%s[%d, %.9g]", i ? ", " : "", idx[static_cast<std::size_t>(i)], lg[idx[static_cast<std::size_t>(i)]]);
  std::printf("], \"sample\": [");
  for (int i = 0; i < nv; i += 151) std::printf("%s[%d, %.9g]", i ? ", " : "", i, lg[i]);
  std::printf("]}");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s MODEL.gguf PROMPT_FILE N_PREDICT THREADS N_CTX\n", argv[0]);
    return 2;
  }
  std::ifstream pf(argv[2], std::ios::binary);
  const std::string prompt((std::istreambuf_iterator<char>(pf)), std::istreambuf_iterator<char>());
  const int n_predict = std::atoi(argv[3]), threads = std::atoi(argv[4]), n_ctx = std::atoi(argv[5]);
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  auto mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return std::fprintf(stderr, "load failed\n"), 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  auto cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(n_ctx);
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(n_ctx);
  cp.n_threads = cp.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return std::fprintf(stderr, "context failed\n"), 1;

  std::vector<llama_token> toks(prompt.size() + 16);
  int n = llama_tokenize(vocab, prompt.data(), static_cast<int>(prompt.size()), toks.data(), static_cast<int>(toks.size()), true, true);
  if (n < 0) return std::fprintf(stderr, "tokenize failed\n"), 1;
  toks.resize(static_cast<std::size_t>(n));
  const int nv = llama_vocab_n_tokens(vocab);
  std::printf("{\"n_vocab\": %d, \"threads\": %d, \"n_ctx\": %d, \"prompt_tokens\": [", nv, threads, n_ctx);
  for (int i = 0; i < n; ++i) std::printf("%s%d", i ? ", " : "", toks[static_cast<std::size_t>(i)]);
  std::printf("], \"steps\": [");
  if (llama_decode(ctx, llama_batch_get_one(toks.data(), n))) return std::fprintf(stderr, "decode failed\n"), 1;
  std::vector<llama_token> greedy;
  std::vector<std::string> pieces;
  std::string text;
  for (int s = 0; s < n_predict; ++s) {
    const float* lg = llama_get_logits_ith(ctx, -1);
    if (s) std::printf(", ");
    print_logits(lg, nv);
    llama_token cur = static_cast<llama_token>(std::max_element(lg, lg + nv) - lg);
    greedy.push_back(cur);
    char piece[256];
    const int m = llama_token_to_piece(vocab, cur, piece, sizeof piece, 0, false);
    pieces.emplace_back(piece, static_cast<std::size_t>(std::max(m, 0)));
    text += pieces.back();
    if (s + 1 < n_predict && llama_decode(ctx, llama_batch_get_one(&cur, 1))) return std::fprintf(stderr, "decode failed\n"), 1;
  }
  std::printf("], \"greedy\": [");
  for (std::size_t i = 0; i < greedy.size(); ++i) std::printf("%s%d", i ? ", " : "", greedy[i]);
  std::printf("], \"greedy_pieces_hex\": [");
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    std::printf("%s\"", i ? ", " : "");
    for (unsigned char c : pieces[i]) std::printf("%02x", c);
    std::printf("\"");
  }
  std::printf("], \"greedy_text_hex\": \"");
  for (unsigned char c : text) std::printf("%02x", c);
  std::printf("\"}\n");
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
