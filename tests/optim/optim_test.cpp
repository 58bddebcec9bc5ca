// Optimizer behaviour beyond the goldens: bit-exact resume, thread-count invariance,
// schedules, the state file format and input validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

#include "fucina/core/rng.hpp"
#include "fucina/optim/optim.hpp"

namespace fo = fucina::optim;
using fucina::Context;
using fucina::ContextOptions;
using fucina::Error;
using fucina::ErrorCode;

namespace {

// A parameter list with owned storage; gradients are g = w*c + d like the goldens.
struct Model {
  std::vector<std::string> names;
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<std::vector<float>> w, g, c, d;

  Model(std::vector<std::string> n, std::vector<std::vector<std::int64_t>> s, std::uint64_t seed)
      : names(std::move(n)), shapes(std::move(s)) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      const auto numel = static_cast<std::size_t>(fo::shape_numel(shapes[i]));
      w.emplace_back(numel), g.emplace_back(numel), c.emplace_back(numel), d.emplace_back(numel);
      for (std::size_t j = 0; j < numel; ++j) {
        w[i][j] = fucina::rng::normal(seed + i, j);
        c[i][j] = 0.5f + fucina::rng::uniform(seed + 100 + i, j);
        d[i][j] = 0.5f * fucina::rng::normal(seed + 200 + i, j);
      }
    }
  }
  void compute_grads() {
    for (std::size_t i = 0; i < w.size(); ++i)
      for (std::size_t j = 0; j < w[i].size(); ++j) g[i][j] = w[i][j] * c[i][j] + d[i][j];
  }
  std::vector<fo::ParamRef> refs() {
    std::vector<fo::ParamRef> r;
    for (std::size_t i = 0; i < w.size(); ++i) r.push_back({names[i], w[i], g[i], shapes[i]});
    return r;
  }
};

using Factory = std::function<std::unique_ptr<fo::Optimizer>()>;

struct Named {
  const char* name;
  Factory make;
};

std::vector<Named> all_optimizers() {
  return {
      {"sgd", [] { return std::make_unique<fo::Sgd>(fo::SgdOptions{0.05, 0.9, 0.0, 1e-3, true}); }},
      {"sgd_damp", [] { return std::make_unique<fo::Sgd>(fo::SgdOptions{0.05, 0.9, 0.2, 1e-2, false}); }},
      {"adamw", [] { return std::make_unique<fo::AdamW>(fo::AdamWOptions{1e-2, 0.9, 0.999, 1e-8, 0.1}); }},
      {"muon",
       [] {
         fo::MuonOptions o;
         o.weight_decay = 0.01, o.adam_lr = 3e-3, o.adam_weight_decay = 0.01;
         return std::make_unique<fo::Muon>(o);
       }},
      {"apollo",
       [] {
         fo::ApolloOptions o;
         o.rank = 4, o.update_proj_gap = 3, o.weight_decay = 0.01, o.seed = 11;
         return std::make_unique<fo::Apollo>(o);
       }},
      {"apollo_mini",
       [] {
         auto o = fo::ApolloOptions::mini();
         o.lr = 1e-3, o.update_proj_gap = 4;
         return std::make_unique<fo::Apollo>(o);
       }},
  };
}

// One training step with cosine schedule and clipping (clip active at first).
void train_step(Context& ctx, Model& m, fo::Optimizer& opt, const fo::LrSchedule& sched) {
  m.compute_grads();
  auto params = m.refs();
  const auto clip = fo::clip_grad_norm(ctx, params, 5.0);
  opt.set_lr(sched.lr(opt.step_count()));
  opt.step(ctx, params, clip.scale);
}

bool bitwise_equal(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

Model small_model() { return Model({"w1", "b", "w2"}, {{8, 16}, {16}, {12, 6}}, 42); }

class EachOptimizer : public ::testing::TestWithParam<Named> {};

TEST_P(EachOptimizer, ResumeFromCheckpointIsBitwiseIdentical) {
  Context ctx(ContextOptions{1});
  const auto make = GetParam().make;
  const double base_lr = make()->lr();
  const auto sched = fo::LrSchedule::cosine(base_lr, 3, 20, 0.1);

  Model straight = small_model();
  auto opt_a = make();
  for (int s = 0; s < 20; ++s) train_step(ctx, straight, *opt_a, sched);

  Model first = small_model();
  auto opt_b = make();
  for (int s = 0; s < 10; ++s) train_step(ctx, first, *opt_b, sched);
  const auto path = std::filesystem::temp_directory_path() / ("fucina_optim_resume_" + std::string(GetParam().name));
  {
    auto params = first.refs();
    fo::save_checkpoint(path, params, *opt_b);
  }
  Model resumed = small_model();
  for (auto& v : resumed.w) std::fill(v.begin(), v.end(), 123.0f);  // must be overwritten
  auto opt_c = make();
  {
    auto params = resumed.refs();
    fo::load_checkpoint(path, params, *opt_c);
  }
  std::filesystem::remove(path);
  EXPECT_TRUE(bitwise_equal(resumed.w, first.w));
  EXPECT_EQ(opt_c->step_count(), 10);
  for (int s = 0; s < 10; ++s) train_step(ctx, resumed, *opt_c, sched);

  EXPECT_TRUE(bitwise_equal(resumed.w, straight.w)) << GetParam().name;
  EXPECT_EQ(opt_c->state_dict().to_bytes(), opt_a->state_dict().to_bytes()) << GetParam().name;
  EXPECT_FALSE(bitwise_equal(first.w, straight.w));  // the test can fail: 10 more steps moved the weights
}

TEST_P(EachOptimizer, OneAndTwoThreadsAreBitwiseIdentical) {
  // Big enough for several 2^15-element chunks and a multi-task GEMM.
  auto run = [&](int threads) {
    Context ctx(ContextOptions{threads});
    Model m({"big", "vec", "tall"}, {{300, 257}, {70000}, {260, 40}}, 7);
    auto opt = GetParam().make();
    const auto sched = fo::LrSchedule::constant(opt->lr());
    for (int s = 0; s < 3; ++s) train_step(ctx, m, *opt, sched);
    return m.w;
  };
  EXPECT_TRUE(bitwise_equal(run(1), run(2))) << GetParam().name;
}

TEST_P(EachOptimizer, GradScaleEqualsPrescaledGradients) {
  Context ctx(ContextOptions{1});
  Model a = small_model(), b = small_model();
  auto oa = GetParam().make(), ob = GetParam().make();
  for (int s = 0; s < 4; ++s) {
    a.compute_grads(), b.compute_grads();
    for (auto& v : b.g)
      for (float& x : v) x = x * 0.37f;
    auto pa = a.refs(), pb = b.refs();
    oa->step(ctx, pa, 0.37f);
    ob->step(ctx, pb);
  }
  EXPECT_TRUE(bitwise_equal(a.w, b.w));
}

TEST_P(EachOptimizer, LowersTheQuadraticLoss) {
  Context ctx(ContextOptions{1});
  Model m = small_model();
  auto loss = [&] {  // sum of 0.5*c*w^2 + d*w: its gradient is c*w + d
    double l = 0;
    for (std::size_t i = 0; i < m.w.size(); ++i)
      for (std::size_t j = 0; j < m.w[i].size(); ++j) l += 0.5 * m.c[i][j] * m.w[i][j] * m.w[i][j] + m.d[i][j] * m.w[i][j];
    return l;
  };
  const double before = loss();
  auto opt = GetParam().make();
  for (int s = 0; s < 50; ++s) {
    m.compute_grads();
    auto p = m.refs();
    opt->step(ctx, p);
  }
  EXPECT_LT(loss(), before) << GetParam().name;
}

TEST_P(EachOptimizer, RejectsAChangedShapeWithoutUpdating) {
  Context ctx(ContextOptions{1});
  Model m = small_model();
  auto opt = GetParam().make();
  m.compute_grads();
  auto p = m.refs();
  opt->step(ctx, p);
  const auto before = m.w;
  p[0].shape = {16, 8};  // same numel, different shape
  try {
    opt->step(ctx, p);
    FAIL() << "expected ShapeMismatch";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ShapeMismatch);
  }
  EXPECT_TRUE(bitwise_equal(m.w, before));
}

INSTANTIATE_TEST_SUITE_P(Optim, EachOptimizer, ::testing::ValuesIn(all_optimizers()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Optimizer, ValidatesParameterLists) {
  Context ctx(ContextOptions{1});
  fo::AdamW opt;
  std::vector<float> w(6), g(5);
  std::vector<fo::ParamRef> p{{"w", w, g, {2, 3}}};
  EXPECT_THROW(opt.step(ctx, p), Error);
  std::vector<float> g6(6);
  p = {{"w", w, g6, {2, 2}}};
  EXPECT_THROW(opt.step(ctx, p), Error);
  p = {{"w", w, g6, {6}}, {"w", w, g6, {6}}};
  EXPECT_THROW(opt.step(ctx, p), Error);
  p = {{"", w, g6, {6}}};
  EXPECT_NO_THROW(opt.step(ctx, p));
  EXPECT_TRUE(opt.state_dict().contains("state/param0/exp_avg"));
  EXPECT_THROW(opt.step(ctx, p, std::nanf("")), Error);
}

TEST(Optimizer, RejectsBadHyperparameters) {
  EXPECT_THROW(fo::Sgd(fo::SgdOptions{0.1, 0.9, 0.1, 0.0, true}), Error);  // nesterov with dampening
  EXPECT_THROW(fo::Sgd(fo::SgdOptions{-1.0}), Error);
  EXPECT_THROW(fo::AdamW(fo::AdamWOptions{1e-3, 1.0}), Error);
  fo::ApolloOptions a;
  a.rank = 0;
  EXPECT_THROW(fo::Apollo{a}, Error);
  fo::AdamW ok;
  EXPECT_THROW(ok.set_lr(std::nan("")), Error);
}

TEST(Apollo, RejectsARankTooLargeForAMatrix) {
  Context ctx(ContextOptions{1});
  fo::ApolloOptions o;
  o.rank = 16;
  fo::Apollo opt(o);
  std::vector<float> w(8 * 16, 1.0f), g(8 * 16, 1.0f);
  std::vector<fo::ParamRef> p{{"w", w, g, {8, 16}}};
  EXPECT_THROW(opt.step(ctx, p), Error);  // wide needs rank < cols
  o.fallback_params = {"w"};
  fo::Apollo fallback(o);
  EXPECT_NO_THROW(fallback.step(ctx, p));
  EXPECT_FALSE(fallback.uses_matrix_path("w", p[0].shape));
}

TEST(Apollo, ProjectionDependsOnKeyAndGeneration) {
  EXPECT_EQ(fo::apollo_projection_stream(3, "a", 0), fo::apollo_projection_stream(3, "a", 0));
  EXPECT_NE(fo::apollo_projection_stream(3, "a", 0), fo::apollo_projection_stream(3, "a", 1));
  EXPECT_NE(fo::apollo_projection_stream(3, "a", 0), fo::apollo_projection_stream(3, "b", 0));
  EXPECT_NE(fo::apollo_projection_stream(3, "a", 0), fo::apollo_projection_stream(4, "a", 0));
}

TEST(Muon, RoutesMatricesAndFallbacks) {
  fo::MuonOptions o;
  o.fallback_params = {"embed"};
  fo::Muon m(o);
  const std::vector<std::int64_t> mat{4, 8}, vec{8}, t3{2, 2, 2};
  EXPECT_TRUE(m.uses_matrix_path("w", mat));
  EXPECT_FALSE(m.uses_matrix_path("embed", mat));
  EXPECT_FALSE(m.uses_matrix_path("b", vec));
  EXPECT_FALSE(m.uses_matrix_path("c", t3));
}

// Independent f64 Newton-Schulz in plain loops.
std::vector<double> ns5_f64(std::vector<double> x, std::int64_t m, std::int64_t n, int steps) {
  double norm = 0;
  for (double v : x) norm += v * v;
  norm = std::sqrt(norm) + 1e-7;
  for (double& v : x) v /= norm;
  for (int it = 0; it < steps; ++it) {
    std::vector<double> a(m * m, 0.0), b(m * m, 0.0), bx(m * n, 0.0);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < m; ++j)
        for (std::int64_t k = 0; k < n; ++k) a[i * m + j] += x[i * n + k] * x[j * n + k];
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < m; ++j) {
        double s = 0;
        for (std::int64_t k = 0; k < m; ++k) s += a[i * m + k] * a[k * m + j];
        b[i * m + j] = -4.7750 * a[i * m + j] + 2.0315 * s;
      }
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::int64_t k = 0; k < m; ++k) s += b[i * m + k] * x[k * n + j];
        bx[i * n + j] = s;
      }
    for (std::int64_t i = 0; i < m * n; ++i) x[i] = 3.4445 * x[i] + bx[i];
  }
  return x;
}

TEST(Muon, NewtonSchulzMatchesAnF64TwinAndTransposes) {
  Context ctx(ContextOptions{2});
  const std::int64_t m = 12, n = 20;
  std::vector<float> x(m * n), xt(m * n);
  for (std::int64_t i = 0; i < m * n; ++i) x[i] = fucina::rng::normal(5, i);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) xt[j * m + i] = x[i * n + j];
  const auto ref = ns5_f64(std::vector<double>(x.begin(), x.end()), m, n, 5);
  fo::newton_schulz5(ctx, x, m, n, 5);
  fo::newton_schulz5(ctx, xt, n, m, 5);  // tall: orthogonalizes the transpose
  double worst = 0, scale = 0;
  for (std::int64_t i = 0; i < m * n; ++i) worst = std::max(worst, std::fabs(x[i] - ref[i])), scale = std::max(scale, std::fabs(ref[i]));
  EXPECT_LT(worst, 1e-5 * scale);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) EXPECT_EQ(xt[j * m + i], x[i * n + j]);
  // Near-orthogonal rows: diag(X X^T) lands in Keller's (0.5, 1.5) band.
  for (std::int64_t i = 0; i < m; ++i) {
    double s = 0;
    for (std::int64_t k = 0; k < n; ++k) s += double(x[i * n + k]) * x[i * n + k];
    EXPECT_GT(s, 0.25);
    EXPECT_LT(s, 2.25);
  }
}

TEST(Clip, NormIsThreadInvariantAndMatchesF64) {
  std::vector<float> a(100003), b(77);
  double ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = fucina::rng::normal(1, i), ref += double(a[i]) * a[i];
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = fucina::rng::normal(2, i), ref += double(b[i]) * b[i];
  std::vector<fo::ParamRef> p{{"a", {}, a, {}}, {"b", {}, b, {}}};
  Context c1(ContextOptions{1}), c2(ContextOptions{2});
  const float n1 = fo::global_grad_norm(c1, p), n2 = fo::global_grad_norm(c2, p);
  EXPECT_EQ(n1, n2);
  EXPECT_EQ(n1, static_cast<float>(std::sqrt(ref)));
  EXPECT_EQ(fo::clip_grad_norm(c1, p, 1e6).scale, 1.0f);  // below the threshold: untouched
  const auto r = fo::clip_grad_norm(c1, p, 1.0);
  EXPECT_NEAR(r.scale * r.norm, 1.0, 1e-5);
  EXPECT_THROW(fo::clip_grad_norm(c1, p, 0.0), Error);
}

TEST(Schedule, ConstantWarmupAndCosine) {
  EXPECT_EQ(fo::LrSchedule::constant(0.1).lr(1000), 0.1);
  const auto w = fo::LrSchedule::linear_warmup(1.0, 4);
  EXPECT_EQ(w.lr(0), 0.25);
  EXPECT_EQ(w.lr(1), 0.5);
  EXPECT_EQ(w.lr(3), 1.0);
  EXPECT_EQ(w.lr(100), 1.0);
  const auto c = fo::LrSchedule::cosine(2.0, 10, 110, 0.1);
  EXPECT_EQ(c.lr(4), 1.0);                       // warmup: (4+1)/10 * 2
  EXPECT_EQ(c.lr(10), 2.0);                      // cosine start
  EXPECT_NEAR(c.lr(60), 2.0 * 0.55, 1e-15);      // midpoint: 0.1 + 0.9/2
  EXPECT_NEAR(c.lr(110), 0.2, 1e-15);            // end: min ratio
  EXPECT_NEAR(c.lr(500), 0.2, 1e-15);            // stays at the floor
  EXPECT_GT(c.lr(30), c.lr(31));
  EXPECT_THROW(fo::LrSchedule::cosine(1.0, 10, 5), Error);
  EXPECT_THROW(fo::LrSchedule::cosine(1.0, 0, 5, 1.5), Error);
}

fo::StateDict trained_adamw_dict(fo::AdamW& opt) {
  Context ctx(ContextOptions{1});
  Model m = small_model();
  for (int s = 0; s < 3; ++s) {
    m.compute_grads();
    auto p = m.refs();
    opt.step(ctx, p);
  }
  return opt.state_dict();
}

TEST(StateFile, RoundTripsAndRejectsDamage) {
  fo::AdamW opt;
  const auto dict = trained_adamw_dict(opt);
  const auto bytes = dict.to_bytes();
  EXPECT_EQ(fo::StateDict::from_bytes(bytes).to_bytes(), bytes);
  auto expect_invalid = [](std::span<const std::uint8_t> b) {
    try {
      (void)fo::StateDict::from_bytes(b);
      ADD_FAILURE() << "accepted damaged bytes";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidFile);
    }
  };
  for (std::size_t cut : {std::size_t{0}, std::size_t{7}, std::size_t{30}, bytes.size() / 2, bytes.size() - 1})
    expect_invalid(std::span(bytes).first(cut));
  auto flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  expect_invalid(flipped);
  auto magic = bytes;
  magic[0] = 'X';
  expect_invalid(magic);
  EXPECT_THROW(fo::StateDict::load("/nonexistent/dir/state.bin"), Error);
}

TEST(StateFile, LoadIsTransactional) {
  fo::AdamW opt;
  const auto good = trained_adamw_dict(opt);
  const auto before = opt.state_dict().to_bytes();
  // A dict where one slot's moment has the wrong shape: nothing may change.
  fo::StateDict bad = good;
  const std::int64_t wrong[1] = {3};
  const float vals[3] = {1, 2, 3};
  bad.put_f32("state/w2/exp_avg_sq", wrong, vals);
  bad.put_i64("optim/step", 99);
  EXPECT_THROW(opt.load_state_dict(bad), Error);
  EXPECT_EQ(opt.state_dict().to_bytes(), before);
  // Another optimizer kind's state is refused.
  fo::Sgd sgd;
  EXPECT_THROW(sgd.load_state_dict(good), Error);
  // Checkpoint with a missing parameter: params and optimizer stay untouched.
  Model m = small_model();
  const auto w_before = m.w;
  auto params = m.refs();
  fo::StateDict ck = fo::checkpoint_dict(params, opt);
  fo::StateDict partial;
  for (const auto& [name, r] : ck.records())
    if (name != "param/b") {
      if (r.type == fo::RecordType::f32) partial.put_f32(name, r.shape, r.f32);
      else if (r.type == fo::RecordType::f64) partial.put_f64(name, r.f64[0]);
      else if (r.shape.empty()) partial.put_i64(name, r.i64[0]);
      else partial.put_i64s(name, r.i64);
    }
  for (auto& v : m.w) std::fill(v.begin(), v.end(), 9.0f);
  const auto w_nines = m.w;
  fo::AdamW fresh;
  EXPECT_THROW(fo::restore_checkpoint(partial, params, fresh), Error);
  EXPECT_TRUE(bitwise_equal(m.w, w_nines));
  EXPECT_EQ(fresh.step_count(), 0);
  fo::restore_checkpoint(ck, params, fresh);
  EXPECT_TRUE(bitwise_equal(m.w, w_before));
  EXPECT_EQ(fresh.state_dict().to_bytes(), opt.state_dict().to_bytes());
}

}  // namespace
