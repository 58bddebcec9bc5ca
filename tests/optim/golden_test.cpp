// Golden parity: 50-step trajectories against torch 1.13 (SGD, AdamW via torch.optim;
// Muon and APOLLO via their reference step functions transcribed to torch f32). The
// goldens and the generator live in tests/data/optim and tools/dev/optim_goldens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "fucina/core/rng.hpp"
#include "fucina/optim/optim.hpp"
#include "support/shared_dir.hpp"

namespace fo = fucina::optim;
using nlohmann::json;

namespace {

json load_json(const std::string& name) {
  const auto path = fucina::test::test_data_dir() / "optim" / name;
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  return json::parse(f);
}

std::vector<float> floats(const json& j) {
  std::vector<float> v;
  for (const auto& x : j) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

std::unique_ptr<fo::Optimizer> make_optimizer(const json& cfg) {
  const std::string kind = cfg["optimizer"];
  if (kind == "sgd") {
    fo::SgdOptions o;
    o.lr = cfg["lr"], o.momentum = cfg["momentum"], o.dampening = cfg["dampening"];
    o.weight_decay = cfg["weight_decay"], o.nesterov = cfg["nesterov"];
    return std::make_unique<fo::Sgd>(o);
  }
  if (kind == "adamw") {
    fo::AdamWOptions o;
    o.lr = cfg["lr"], o.beta1 = cfg["beta1"], o.beta2 = cfg["beta2"], o.eps = cfg["eps"];
    o.weight_decay = cfg["weight_decay"];
    return std::make_unique<fo::AdamW>(o);
  }
  if (kind == "muon") {
    fo::MuonOptions o;
    o.lr = cfg["lr"], o.momentum = cfg["momentum"], o.weight_decay = cfg["weight_decay"], o.ns_steps = cfg["ns_steps"];
    o.adam_lr = cfg["adam_lr"], o.adam_beta1 = cfg["adam_beta1"], o.adam_beta2 = cfg["adam_beta2"];
    o.adam_eps = cfg["adam_eps"], o.adam_weight_decay = cfg["adam_weight_decay"];
    return std::make_unique<fo::Muon>(o);
  }
  fo::ApolloOptions o;
  o.lr = cfg["lr"], o.beta1 = cfg["beta1"], o.beta2 = cfg["beta2"], o.eps = cfg["eps"];
  o.weight_decay = cfg["weight_decay"], o.rank = cfg["rank"], o.update_proj_gap = cfg["update_proj_gap"];
  o.scale = cfg["scale"], o.seed = cfg["seed"];
  o.scale_type = cfg["scale_type"] == "tensor" ? fo::ApolloScale::tensor : fo::ApolloScale::channel;
  return std::make_unique<fo::Apollo>(o);
}

// max_rel: norm-wise relative error per tensor, max|got-ref| / max|ref| (the acceptance
// metric). max_elem_rel: element-wise |got-ref| / max(|ref|, 1e-2), reported and bounded
// loosely (reduction-order noise on a near-zero element dominates it).
struct Err {
  double max_abs = 0, max_rel = 0, max_elem_rel = 0;
};

void accumulate(Err& e, std::span<const float> got, std::span<const float> ref) {
  double tensor_abs = 0, ref_max = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - ref[i]);
    tensor_abs = std::max(tensor_abs, d);
    ref_max = std::max(ref_max, std::fabs(static_cast<double>(ref[i])));
    e.max_elem_rel = std::max(e.max_elem_rel, d / std::max(std::fabs(static_cast<double>(ref[i])), 1e-2));
  }
  e.max_abs = std::max(e.max_abs, tensor_abs);
  e.max_rel = std::max(e.max_rel, tensor_abs / std::max(ref_max, 1e-30));
}

Err run_golden(const std::string& case_name, int threads) {
  const json g = load_json(case_name + ".json");
  const json& cfg = g["config"];
  fucina::Context ctx(fucina::ContextOptions{threads});
  std::vector<std::string> names = g["names"];
  std::vector<std::vector<float>> w, gr, c, d;
  std::vector<fo::ParamRef> params;
  for (const auto& n : names) {
    w.push_back(floats(g["init"][n]));
    c.push_back(floats(g["c"][n]));
    d.push_back(floats(g["d"][n]));
    gr.emplace_back(w.back().size());
  }
  for (std::size_t i = 0; i < names.size(); ++i)
    params.push_back({names[i], w[i], gr[i], g["shapes"][names[i]].get<std::vector<std::int64_t>>()});
  auto opt = make_optimizer(cfg);
  std::optional<fo::LrSchedule> sched;
  if (cfg.contains("schedule"))
    sched = fo::LrSchedule::cosine(cfg["lr"], cfg["schedule"]["warmup"], cfg["schedule"]["total"],
                                   cfg["schedule"]["min_ratio"]);
  Err err;
  const int steps = g["steps"];
  for (int step = 1; step <= steps; ++step) {
    for (std::size_t i = 0; i < w.size(); ++i)
      for (std::size_t j = 0; j < w[i].size(); ++j) gr[i][j] = w[i][j] * c[i][j] + d[i][j];
    float scale = 1.0f;
    if (cfg.contains("clip")) {
      const auto r = fo::clip_grad_norm(ctx, params, cfg["clip"].get<double>());
      const double ref = g["clip_norms"][step - 1];
      EXPECT_NEAR(r.norm, ref, 1e-6 * ref) << case_name << " step " << step;
      scale = r.scale;
    }
    if (sched) opt->set_lr(sched->lr(opt->step_count()));
    opt->step(ctx, params, scale);
    const std::string key = std::to_string(step);
    if (!g["snapshots"].contains(key)) continue;
    for (std::size_t i = 0; i < names.size(); ++i) {
      Err one;
      accumulate(one, w[i], floats(g["snapshots"][key][names[i]]));
      if (std::getenv("FUCINA_GOLDEN_VERBOSE"))
        std::printf("  %s step %d %s abs %.3g rel %.3g elem rel %.3g\n", case_name.c_str(), step, names[i].c_str(),
                    one.max_abs, one.max_rel, one.max_elem_rel);
      accumulate(err, w[i], floats(g["snapshots"][key][names[i]]));
    }
  }
  return err;
}

class Golden : public ::testing::TestWithParam<const char*> {};

TEST_P(Golden, MatchesReferenceOver50Steps) {
  const Err e = run_golden(GetParam(), 1);
  std::printf("[golden] %-18s max abs %.3g  norm-wise rel %.3g  element-wise rel %.3g\n", GetParam(), e.max_abs,
              e.max_rel, e.max_elem_rel);
  RecordProperty("max_rel", std::to_string(e.max_rel));
  EXPECT_LE(e.max_rel, 1e-6) << GetParam();
  EXPECT_LE(e.max_elem_rel, 1e-5) << GetParam();
}

TEST_P(Golden, TwoThreadsMatchTheGoldenToo) {
  const Err e = run_golden(GetParam(), 2);
  EXPECT_LE(e.max_rel, 1e-6) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Optim, Golden,
                         ::testing::Values("sgd_plain", "sgd_momentum", "sgd_nesterov", "adamw", "adamw_cosine_clip",
                                           "muon", "apollo", "apollo_mini"),
                         [](const auto& info) { return std::string(info.param); });

TEST(GoldenRng, ApolloProjectionStreamMatchesThePythonPort) {
  const json g = load_json("apollo.json");
  const std::uint64_t stream = fo::apollo_projection_stream(g["config"]["seed"], "w1", 0);
  EXPECT_EQ(std::to_string(stream), g["rng_check"]["stream"].get<std::string>());
  const auto ref = floats(g["rng_check"]["normals"]);
  for (std::size_t j = 0; j < ref.size(); ++j) EXPECT_EQ(fucina::rng::normal(stream, j), ref[j]) << j;
}

TEST(GoldenClip, MatchesTorchClipGradNorm) {
  const json g = load_json("clip.json");
  fucina::Context ctx(fucina::ContextOptions{1});
  std::vector<std::string> names = g["names"];
  for (const char* label : {"active", "inactive"}) {
    const json& k = g["cases"][label];
    std::vector<std::vector<float>> grads;
    for (const auto& n : names) {
      auto w = floats(g["init"][n]), c = floats(g["c"][n]), d = floats(g["d"][n]);
      std::vector<float> gr(w.size());
      for (std::size_t j = 0; j < w.size(); ++j) gr[j] = w[j] * c[j] + d[j];
      grads.push_back(std::move(gr));
    }
    std::vector<std::span<float>> spans(grads.begin(), grads.end());
    const float norm = fo::clip_grad_norm_inplace(ctx, spans, k["max_norm"].get<double>());
    const double ref_norm = k["norm"];
    EXPECT_NEAR(norm, ref_norm, 1e-6 * ref_norm) << label;
    Err e;
    for (std::size_t i = 0; i < names.size(); ++i) accumulate(e, grads[i], floats(k["grads"][names[i]]));
    std::printf("[golden] clip %-8s norm %.9g (torch %.9g) grads max rel %.3g\n", label, norm, ref_norm, e.max_rel);
    EXPECT_LE(e.max_rel, 1e-6) << label;
  }
}

}  // namespace
