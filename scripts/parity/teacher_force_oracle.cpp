// Teacher-forcing oracle: runs llama.cpp (public llama.h API, CPU) on a GGUF over the first
// N tokens of a text in one batch, with logits for every position, and writes the compact
// golden described in tests/data/quant_parity/README.md. Prints one JSON object (the
// golden's index entry) to stdout.
//   teacher_force_oracle MODEL.gguf TEXT_FILE N OUT.bin NAME FORMAT SHA256 [FULL_OUT.f32] [threads]
// FULL_OUT.f32 (optional, "-" for none): every position's full logits row, row-major f32,
// for measuring the golden's KL estimator against the exact KL.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "llama.h"

namespace {

constexpr int kTop = 32;     // T: exact top-T ids and logits
constexpr int kSample = 64;  // S: systematic sample of the tail

template <typename T>
void put(std::vector<char>& out, T v) {
  const char* p = reinterpret_cast<const char*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

// One position's record (see the README for the layout).
void summarize(const float* l, int nv, std::vector<char>& out) {
  double m = l[0];
  for (int i = 1; i < nv; ++i) m = std::max(m, static_cast<double>(l[i]));
  double s = 0.0;
  for (int i = 0; i < nv; ++i) s += std::exp(static_cast<double>(l[i]) - m);
  const double lse = m + std::log(s);

  std::vector<int> idx(static_cast<std::size_t>(nv));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + kTop, idx.end(), [&](int a, int b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  std::vector<char> in_top(static_cast<std::size_t>(nv), 0);
  double p_top = 0.0;
  for (int t = 0; t < kTop; ++t) {
    in_top[static_cast<std::size_t>(idx[t])] = 1;
    p_top += std::exp(static_cast<double>(l[idx[t]]) - lse);
  }
  double p_tail = 0.0;
  for (int i = 0; i < nv; ++i)
    if (!in_top[static_cast<std::size_t>(i)]) p_tail += std::exp(static_cast<double>(l[i]) - lse);

  // Systematic sampling over the tail's CDF in vocabulary order: u_j = (j + 0.5) / S.
  std::vector<int> tail;
  double cum = 0.0;
  int last = -1;
  for (int i = 0; i < nv && static_cast<int>(tail.size()) < kSample; ++i) {
    if (in_top[static_cast<std::size_t>(i)]) continue;
    cum += std::exp(static_cast<double>(l[i]) - lse);
    last = i;
    while (static_cast<int>(tail.size()) < kSample && cum >= (tail.size() + 0.5) / kSample * p_tail) tail.push_back(i);
  }
  while (static_cast<int>(tail.size()) < kSample) tail.push_back(last);  // rounding at the very end

  put<std::int32_t>(out, idx[0]);
  put<float>(out, l[idx[0]] - l[idx[1]]);
  put<double>(out, lse);
  put<double>(out, p_tail);
  for (int t = 0; t < kTop; ++t) put<std::int32_t>(out, idx[t]);
  for (int t = 0; t < kTop; ++t) put<float>(out, l[idx[t]]);
  for (int j = 0; j < kSample; ++j) put<std::int32_t>(out, tail[j]);
  for (int j = 0; j < kSample; ++j) put<float>(out, l[tail[j]]);
  (void)p_top;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr, "usage: %s MODEL.gguf TEXT_FILE N OUT.bin NAME FORMAT SHA256 [FULL_OUT.f32|-] [threads]\n", argv[0]);
    return 2;
  }
  const char* path = argv[1];
  std::ifstream tf(argv[2], std::ios::binary);
  if (!tf) { std::fprintf(stderr, "cannot read %s\n", argv[2]); return 1; }
  const std::string text((std::istreambuf_iterator<char>(tf)), std::istreambuf_iterator<char>());
  const int n_want = std::atoi(argv[3]);
  const char* out_path = argv[4];
  const std::string name = argv[5], format = argv[6], sha = argv[7];
  const char* full_path = argc > 8 && std::strcmp(argv[8], "-") != 0 ? argv[8] : nullptr;
  const int threads = argc > 9 ? std::atoi(argv[9]) : 2;

  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  auto mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(path, mp);
  if (!model) { std::fprintf(stderr, "load failed: %s\n", path); return 1; }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  auto cp = llama_context_default_params();
  cp.n_ctx = 1024;
  cp.n_batch = 1024;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) { std::fprintf(stderr, "context failed\n"); return 1; }

  std::vector<llama_token> toks(text.size() + 16);
  int n = llama_tokenize(vocab, text.c_str(), static_cast<int>(text.size()), toks.data(), static_cast<int>(toks.size()), true, false);
  if (n < 0) { std::fprintf(stderr, "tokenize failed\n"); return 1; }
  if (n < n_want) { std::fprintf(stderr, "text has only %d tokens, %d wanted\n", n, n_want); return 1; }
  toks.resize(static_cast<std::size_t>(n_want));

  llama_batch b = llama_batch_init(n_want, 0, 1);
  for (int i = 0; i < n_want; ++i) {
    b.token[i] = toks[static_cast<std::size_t>(i)];
    b.pos[i] = i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = 1;
  }
  b.n_tokens = n_want;
  if (llama_decode(ctx, b) != 0) { std::fprintf(stderr, "decode failed\n"); return 1; }
  const int nv = llama_vocab_n_tokens(vocab);

  std::vector<char> out;
  out.insert(out.end(), {'F', 'Q', 'P', 'G'});
  put<std::uint32_t>(out, 1);  // version
  put<std::uint32_t>(out, static_cast<std::uint32_t>(n_want));
  put<std::uint32_t>(out, kTop);
  put<std::uint32_t>(out, kSample);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(nv));
  std::FILE* full = full_path ? std::fopen(full_path, "wb") : nullptr;
  for (int i = 0; i < n_want; ++i) {
    const float* l = llama_get_logits_ith(ctx, i);
    summarize(l, nv, out);
    if (full) std::fwrite(l, sizeof(float), static_cast<std::size_t>(nv), full);
  }
  if (full) std::fclose(full);
  std::FILE* f = std::fopen(out_path, "wb");
  if (!f) { std::fprintf(stderr, "cannot write %s\n", out_path); return 1; }
  std::fwrite(out.data(), 1, out.size(), f);
  std::fclose(f);

  const char* slash = std::strrchr(out_path, '/');
  std::printf("{\"model\": \"%s\", \"format\": \"%s\", \"sha256\": \"%s\", \"file\": \"%s\", \"n_vocab\": %d, \"tokens\": [",
              name.c_str(), format.c_str(), sha.c_str(), slash ? slash + 1 : out_path, nv);
  for (int i = 0; i < n_want; ++i) std::printf("%s%d", i ? ", " : "", toks[static_cast<std::size_t>(i)]);
  std::printf("]}");
  llama_batch_free(b);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
