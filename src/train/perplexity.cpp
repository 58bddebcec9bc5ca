#include "fucina/train/perplexity.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "fucina/core/error.hpp"

namespace fucina::train {

PerplexityResult perplexity(const model::Model& model, const tokenizer::Tokenizer& tok, Context& ctx,
                            std::string_view text, const PerplexityOptions& options,
                            const std::function<void(std::int64_t, double)>& on_chunk) {
  const std::int64_t n_ctx = options.n_ctx;
  const std::int64_t model_ctx = model.config().n_ctx_train;
  FUCINA_CHECK(n_ctx >= 8 && (model_ctx <= 0 || n_ctx <= model_ctx), InvalidArgument,
               "[perplexity] the chunk length {} must be in [8, {}] (the model's context)", n_ctx, model_ctx);
  const std::vector<tokenizer::TokenId> tokens = tok.encode(text);
  const auto n_tokens = static_cast<std::int64_t>(tokens.size());
  FUCINA_CHECK(n_tokens >= 2 * n_ctx, InvalidArgument,
               "[perplexity] the text is {} tokens; a chunk length of {} needs at least {}", n_tokens, n_ctx, 2 * n_ctx);
  std::int64_t n_chunks = n_tokens / n_ctx;
  if (options.n_chunks >= 0) n_chunks = std::min(n_chunks, options.n_chunks);

  const std::int64_t first = n_ctx / 2;
  const auto n_vocab = static_cast<std::int64_t>(tok.vocab_size());
  double nll = 0, nll2 = 0;
  std::int64_t count = 0, bytes = 0;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n_ctx));
  for (std::int64_t c = 0; c < n_chunks; ++c) {
    std::copy_n(tokens.begin() + c * n_ctx, n_ctx, ids.begin());
    if (tok.add_bos()) ids[0] = tok.bos_id();
    auto cache = model.new_cache(n_ctx);
    const auto logits = model.forward_all(ctx, cache, ids);
    const auto all = logits.data();
    FUCINA_CHECK(static_cast<std::int64_t>(all.size()) == n_ctx * n_vocab, InvalidFile,
                 "[perplexity] the model's output has {} logits per row; its vocabulary has {} tokens",
                 static_cast<std::int64_t>(all.size()) / n_ctx, n_vocab);
    for (std::int64_t j = first; j < n_ctx - 1; ++j) {
      const float* row = all.data() + j * n_vocab;
      const tokenizer::TokenId next = tokens[static_cast<std::size_t>(c * n_ctx + j + 1)];
      const float max_logit = *std::max_element(row, row + n_vocab);
      double sum = 0;
      for (std::int64_t v = 0; v < n_vocab; ++v) sum += std::exp(row[v] - max_logit);
      const double token_nll = std::log(sum) - static_cast<double>(row[next] - max_logit);
      nll += token_nll;
      nll2 += token_nll * token_nll;
      bytes += static_cast<std::int64_t>(tok.piece(next).size());
      ++count;
    }
    if (on_chunk) on_chunk(c + 1, std::exp(nll / static_cast<double>(count)));
  }
  PerplexityResult r;
  r.chunks = n_chunks;
  r.scored_tokens = count;
  r.scored_bytes = bytes;
  r.mean_nll = nll / static_cast<double>(count);
  r.ppl = std::exp(r.mean_nll);
  const double var = nll2 / static_cast<double>(count) - r.mean_nll * r.mean_nll;
  r.ppl_error = var > 0 && count > 1 ? std::sqrt(var / static_cast<double>(count - 1)) * r.ppl : 0;
  r.bits_per_byte = bytes > 0 ? nll / std::log(2.0) / static_cast<double>(bytes) : 0;
  return r;
}

}  // namespace fucina::train
