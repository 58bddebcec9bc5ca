#include "fucina/sample/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "fucina/core/error.hpp"
#include "fucina/core/rng.hpp"

namespace fucina::sample {

void validate(const SamplerConfig& c) {
  FUCINA_CHECK(std::isfinite(c.temperature) && c.temperature >= 0.f, InvalidArgument,
               "[sampler] temperature {} must be >= 0 (0 is greedy)", c.temperature);
  FUCINA_CHECK(c.top_k >= 0, InvalidArgument, "[sampler] top-k {} must be >= 0 (0 turns it off)", c.top_k);
  FUCINA_CHECK(c.top_p > 0.f && c.top_p <= 1.f, InvalidArgument, "[sampler] top-p {} must be in (0, 1] (1 turns it off)",
               c.top_p);
  FUCINA_CHECK(c.min_p >= 0.f && c.min_p <= 1.f, InvalidArgument, "[sampler] min-p {} must be in [0, 1]", c.min_p);
  FUCINA_CHECK(c.repeat_penalty > 0.f && std::isfinite(c.repeat_penalty), InvalidArgument,
               "[sampler] repeat penalty {} must be positive", c.repeat_penalty);
  FUCINA_CHECK(std::isfinite(c.presence_penalty) && std::isfinite(c.frequency_penalty), InvalidArgument,
               "[sampler] penalties must be finite");
  FUCINA_CHECK(c.penalty_last_n >= 0, InvalidArgument, "[sampler] penalty window {} must be >= 0", c.penalty_last_n);
}

// Every greedy token reads a whole row of logits (152k floats): the largest value by lanes
// (`x > m ? x : m` is one vector max, no index to carry), then the first block holding it.
// A NaN breaks the lanes' order: max_element's answer then, as before.
std::int32_t argmax(std::span<const float> logits) {
  FUCINA_CHECK(!logits.empty(), InvalidArgument, "[sampler] empty logits");
  constexpr std::size_t kLanes = 16;
  const std::size_t n = logits.size(), blocks = n / kLanes * kLanes;
  const float* x = logits.data();
  float m = x[0];
  bool nan = false;
  if (blocks > 0) {
    float lane[kLanes];
    for (std::size_t l = 0; l < kLanes; ++l) lane[l] = x[l];
    for (std::size_t i = 0; i < blocks; i += kLanes)
      for (std::size_t l = 0; l < kLanes; ++l) {
        lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
        nan |= x[i + l] != x[i + l];
      }
    for (std::size_t l = 0; l < kLanes; ++l) m = lane[l] > m ? lane[l] : m;
  }
  for (std::size_t i = blocks; i < n; ++i) {
    m = x[i] > m ? x[i] : m;
    nan |= x[i] != x[i];
  }
  if (nan) return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  for (std::size_t i = 0; i < blocks; i += kLanes) {
    bool hit = false;
    for (std::size_t l = 0; l < kLanes; ++l) hit |= x[i + l] == m;
    if (!hit) continue;
    for (std::size_t l = 0;; ++l)
      if (x[i + l] == m) return static_cast<std::int32_t>(i + l);
  }
  for (std::size_t i = blocks;; ++i)
    if (x[i] == m) return static_cast<std::int32_t>(i);
}

Sampler::Sampler(SamplerConfig config) : config_(config) { validate(config_); }

void Sampler::reset() {
  recent_.clear();
  draws_ = 0;
}

void Sampler::accept(std::int32_t id) {
  if (config_.penalty_last_n == 0) return;
  recent_.push_back(id);
  while (static_cast<std::int32_t>(recent_.size()) > config_.penalty_last_n) recent_.pop_front();
}

void Sampler::apply_penalties(std::vector<Candidate>& c) const {
  if (!penalties_active()) return;
  std::unordered_map<std::int32_t, int> count;
  for (std::int32_t id : recent_) ++count[id];
  for (auto [id, n] : count) {
    if (id < 0 || static_cast<std::size_t>(id) >= c.size()) continue;
    float& l = c[static_cast<std::size_t>(id)].logit;  // c is still indexed by id here
    l = l > 0.f ? l / config_.repeat_penalty : l * config_.repeat_penalty;
    l -= static_cast<float>(n) * config_.frequency_penalty + config_.presence_penalty;
  }
}

bool Sampler::penalties_active() const {
  return !recent_.empty() &&
         (config_.repeat_penalty != 1.f || config_.presence_penalty != 0.f || config_.frequency_penalty != 0.f);
}

std::int32_t Sampler::sample(std::span<const float> logits) {
  FUCINA_CHECK(!logits.empty(), InvalidArgument, "[sampler] empty logits");
  const bool greedy = config_.temperature <= 0.f || config_.top_k == 1;
  // Greedy without penalties: the same pick as the candidate path below (the first of the
  // largest logits), without writing a candidate per vocabulary entry.
  if (greedy && !penalties_active()) return argmax(logits);
  std::vector<Candidate>& c = work_;
  c.resize(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) c[i] = {static_cast<std::int32_t>(i), logits[i]};
  apply_penalties(c);
  const auto by_logit = [](const Candidate& a, const Candidate& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
  if (greedy) return std::min_element(c.begin(), c.end(), by_logit)->id;

  // top-k, then sort what is left (descending) for top-p / min-p.
  std::size_t n = c.size();
  if (config_.top_k > 0 && static_cast<std::size_t>(config_.top_k) < n) {
    n = static_cast<std::size_t>(config_.top_k);
    std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(n), c.end(), by_logit);
  } else {
    std::sort(c.begin(), c.end(), by_logit);
  }
  c.resize(n);
  const float max_logit = c[0].logit;
  std::vector<float> p(n);
  double total = 0.0;
  for (std::size_t i = 0; i < n; ++i) total += p[i] = std::exp(c[i].logit - max_logit);
  if (config_.top_p < 1.f) {
    double cum = 0.0;
    std::size_t keep = n;
    for (std::size_t i = 0; i < n; ++i) {
      cum += p[i] / total;
      if (cum >= config_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (config_.min_p > 0.f) {
    std::size_t keep = 1;  // p[0] is the max: p[i] / p[0] >= min_p
    while (keep < n && p[keep] >= config_.min_p) ++keep;
    n = keep;
  }
  // Temperature last: softmax(logit / T) over the survivors, then one inverse-CDF draw.
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += p[i] = std::exp((c[i].logit - max_logit) / config_.temperature);
  const double u = static_cast<double>(rng::uniform(config_.seed, draws_++)) * sum;
  double acc = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    acc += p[i];
    if (u < acc) return c[i].id;
  }
  return c[n - 1].id;
}

}  // namespace fucina::sample
