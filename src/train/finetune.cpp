#include "fucina/train/finetune.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "fucina/core/rng.hpp"
#include "fucina/optim/adamw.hpp"
#include "fucina/optim/apollo.hpp"
#include "fucina/optim/checkpoint.hpp"
#include "fucina/optim/clip.hpp"
#include "fucina/optim/muon.hpp"
#include "fucina/optim/schedule.hpp"
#include "fucina/optim/sgd.hpp"

namespace fucina::train {

namespace {

std::unique_ptr<optim::Optimizer> make_optimizer(const FinetuneOptions& o, std::span<const model::Trainable> params) {
  if (o.optimizer == "adamw") return std::make_unique<optim::AdamW>(optim::AdamWOptions{.lr = o.lr, .weight_decay = o.weight_decay});
  if (o.optimizer == "sgd")
    return std::make_unique<optim::Sgd>(optim::SgdOptions{.lr = o.lr, .momentum = 0.9, .weight_decay = o.weight_decay});
  // Muon and APOLLO update matrices; embeddings, the head and vectors take their Adam path.
  std::vector<std::string> fallback;
  for (const auto& p : params)
    if (p.value.rank != 2 || p.name == "token_embd.weight" || p.name == "output.weight") fallback.push_back(p.name);
  if (o.optimizer == "muon") {
    optim::MuonOptions m;
    m.lr = o.lr, m.adam_lr = o.lr, m.weight_decay = o.weight_decay, m.adam_weight_decay = o.weight_decay;
    m.fallback_params = fallback;
    return std::make_unique<optim::Muon>(m);
  }
  if (o.optimizer == "apollo") {
    optim::ApolloOptions a;
    a.lr = o.lr, a.weight_decay = o.weight_decay, a.seed = o.seed;
    a.fallback_params = fallback;
    return std::make_unique<optim::Apollo>(a);
  }
  FUCINA_CHECK(false, InvalidArgument, "[finetune] unknown optimizer '{}' (adamw, muon, sgd or apollo)", o.optimizer);
  return nullptr;
}

// Example indices of epoch e in training order (Note [Finetune data order]).
std::vector<std::int64_t> epoch_order(std::int64_t n, std::uint64_t seed, std::int64_t epoch) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  const std::uint64_t s = rng::bits(seed, static_cast<std::uint64_t>(epoch) + 0x5eed);
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(rng::bits(s, static_cast<std::uint64_t>(i)) %
                                                                          static_cast<std::uint64_t>(i + 1))]);
  return p;
}

// A batch as one forward: the examples' input rows back to back, their targets (-100 where
// the loss mask is off).
struct Rows {
  std::vector<std::int32_t> ids, targets;
  std::vector<std::int64_t> starts{0};
  std::int64_t n_targets = 0;
};

void append(Rows& r, const Example& e) {
  const std::size_t n = e.tokens.size();
  if (n < 2) return;
  for (std::size_t i = 0; i + 1 < n; ++i) {
    r.ids.push_back(e.tokens[i]);
    r.targets.push_back(e.loss[i + 1] ? e.tokens[i + 1] : -100);
    r.n_targets += e.loss[i + 1] ? 1 : 0;
  }
  r.starts.push_back(static_cast<std::int64_t>(r.ids.size()));
}

std::uint64_t mix(std::uint64_t h, std::uint64_t v) { return rng::splitmix64(h ^ (v + 0x9e3779b97f4a7c15ull)); }

}  // namespace

Finetune::Finetune(Context& ctx, model::Model& model, Dataset train, FinetuneOptions options)
    : ctx_(ctx), model_(model), train_(std::move(train)), opt_(std::move(options)) {
  FUCINA_CHECK(!train_.examples.empty(), InvalidArgument, "[finetune] no training examples");
  FUCINA_CHECK(opt_.batch > 0, InvalidArgument, "[finetune] batch must be positive, got {}", opt_.batch);
  FUCINA_CHECK(opt_.lr > 0, InvalidArgument, "[finetune] learning rate must be positive, got {}", opt_.lr);
  FUCINA_CHECK(opt_.epochs > 0 || opt_.steps > 0, InvalidArgument, "[finetune] need epochs or steps > 0");
  FUCINA_CHECK(opt_.grad_clip >= 0, InvalidArgument, "[finetune] grad-clip must be >= 0");
  FUCINA_CHECK(opt_.schedule == "cosine" || opt_.schedule == "constant", InvalidArgument,
               "[finetune] unknown schedule '{}' (cosine or constant)", opt_.schedule);
  const auto n = static_cast<std::int64_t>(train_.examples.size());
  steps_per_epoch_ = (n + opt_.batch - 1) / opt_.batch;
  total_ = opt_.steps > 0 ? opt_.steps : steps_per_epoch_ * opt_.epochs;
  FUCINA_CHECK(opt_.warmup >= 0 && opt_.warmup <= total_, InvalidArgument, "[finetune] warmup {} outside 0..{} steps",
               opt_.warmup, total_);
  params_ = opt_.lora ? model::attach_lora(ctx_, model_.mutable_weights(), model_.config(), opt_.lora_spec)
                      : model::make_trainable(ctx_, model_.mutable_weights(), model_.config());
  optimizer_ = make_optimizer(opt_, params_);
}

StepReport Finetune::run_step() {
  FUCINA_CHECK(step_ < total_, InvalidArgument, "[finetune] all {} steps are done", total_);
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t epoch = step_ / steps_per_epoch_, pos = step_ % steps_per_epoch_;
  if (order_epoch_ != epoch) {  // the shuffle once per epoch, not per step
    order_ = epoch_order(static_cast<std::int64_t>(train_.examples.size()), opt_.seed, epoch);
    order_epoch_ = epoch;
  }
  const std::vector<std::int64_t>& order = order_;
  Rows rows;
  for (std::int64_t i = pos * opt_.batch; i < std::min<std::int64_t>((pos + 1) * opt_.batch, static_cast<std::int64_t>(order.size())); ++i)
    append(rows, train_.examples[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])]);

  StepReport r;
  r.total = total_;
  const optim::LrSchedule schedule = opt_.schedule == "cosine" ? optim::LrSchedule::cosine(opt_.lr, opt_.warmup, total_)
                                                               : optim::LrSchedule::linear_warmup(opt_.lr, opt_.warmup);
  r.lr = schedule.lr(step_);
  if (rows.n_targets > 0) {
    model::zero_grads(params_);
    auto logits = model_.forward_train(ctx_, rows.ids, rows.starts, opt_.grad_checkpoint);
    auto targets = TensorT<DType::i32, "seq">::from_data(ctx_, {static_cast<std::int64_t>(rows.targets.size())}, rows.targets);
    auto loss = cross_entropy<"vocab">(ctx_, logits, targets);
    loss.backward(ctx_);
    r.loss = loss.item();
    std::vector<optim::ParamRef> refs;
    for (const auto& p : params_) refs.push_back(model::param_ref(p));
    float scale = 1.f;
    if (opt_.grad_clip > 0) {
      const auto clip = optim::clip_grad_norm(ctx_, refs, opt_.grad_clip);
      r.grad_norm = clip.norm, scale = clip.scale;
    } else {
      r.grad_norm = optim::global_grad_norm(ctx_, refs);
    }
    // Parameters no target reached (a LoRA whose matrices saw no loss) take a zero gradient.
    std::vector<std::vector<float>> zeros;
    for (auto& ref : refs)
      if (ref.grad.empty()) ref.grad = zeros.emplace_back(ref.value.size(), 0.f);
    optimizer_->set_lr(r.lr);
    optimizer_->step(ctx_, refs, scale);
    model::zero_grads(params_);
  }
  r.tokens = static_cast<std::int64_t>(rows.ids.size());
  r.step = ++step_;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

double Finetune::evaluate(const Dataset& data) {
  autograd::NoGradGuard no_grad;
  double total = 0;
  std::int64_t count = 0;
  for (std::size_t b = 0; b < data.examples.size(); b += static_cast<std::size_t>(opt_.batch)) {
    Rows rows;
    for (std::size_t i = b; i < std::min(data.examples.size(), b + static_cast<std::size_t>(opt_.batch)); ++i)
      append(rows, data.examples[i]);
    if (rows.n_targets == 0) continue;
    auto logits = model_.forward_train(ctx_, rows.ids, rows.starts);
    auto targets = TensorT<DType::i32, "seq">::from_data(ctx_, {static_cast<std::int64_t>(rows.targets.size())}, rows.targets);
    total += static_cast<double>(cross_entropy<"vocab">(ctx_, logits, targets).item()) * static_cast<double>(rows.n_targets);
    count += rows.n_targets;
  }
  FUCINA_CHECK(count > 0, InvalidArgument, "[finetune] the validation data has no target tokens");
  return total / static_cast<double>(count);
}

std::uint64_t Finetune::setup_hash() const {
  std::uint64_t h = mix(0, opt_.lora ? 1 : 2);
  h = mix(h, static_cast<std::uint64_t>(opt_.batch));
  h = mix(h, opt_.seed);
  h = mix(h, static_cast<std::uint64_t>(total_));
  for (const auto& e : train_.examples)
    for (std::size_t i = 0; i < e.tokens.size(); ++i) h = mix(h, static_cast<std::uint64_t>(e.tokens[i]) * 2 + e.loss[i]);
  return h;
}

void Finetune::save_checkpoint(const std::filesystem::path& file) const {
  std::vector<optim::ParamRef> refs;
  for (const auto& p : params_) refs.push_back(model::param_ref(p));
  optim::StateDict d = optim::checkpoint_dict(refs, *optimizer_);
  d.put_i64("finetune/step", step_);
  d.put_i64("finetune/setup", static_cast<std::int64_t>(setup_hash()));
  d.save(file);
}

void Finetune::load_checkpoint(const std::filesystem::path& file) {
  const optim::StateDict d = optim::StateDict::load(file);
  FUCINA_CHECK(d.contains("finetune/step") && d.contains("finetune/setup"), InvalidFile,
               "[finetune] {} is not a finetune checkpoint", file.string());
  FUCINA_CHECK(static_cast<std::uint64_t>(d.get_i64("finetune/setup")) == setup_hash(), InvalidFile,
               "[finetune] {} was written for other data, batch, seed, step count or mode: resume needs the same "
               "options as the interrupted run",
               file.string());
  const std::int64_t step = d.get_i64("finetune/step");
  FUCINA_CHECK(step >= 0 && step <= total_, InvalidFile, "[finetune] {} is at step {} of {}", file.string(), step, total_);
  std::vector<optim::ParamRef> refs;
  for (const auto& p : params_) refs.push_back(model::param_ref(p));
  optim::restore_checkpoint(d, refs, *optimizer_);
  step_ = step;
}

void Finetune::write_output(const std::filesystem::path& out) const {
  if (opt_.lora)
    model::write_lora(out, model::lora_adapter_of(params_, std::string(model::arch_name(model_.config().arch)), opt_.lora_spec.alpha));
  else
    model::write_trained_model(out, model_.file(), params_);
}

}  // namespace fucina::train
