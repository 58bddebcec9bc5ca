#pragma once
// Shared command line of the ES spirals demos (es_spirals, es_ternary_spirals):
//   [--hidden H] [--population N] [--sigma S] [--lr A] [--weight-decay W] [--iterations I]
//   [--threads T] [--seed K] [--target ACC] [--points P] [--latent L]
#include <fmt/format.h>

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "fucina/autograd/node.hpp"
#include "fucina/es/spirals_demo.hpp"

namespace es_demo_cli {

using namespace fucina;

// Applies one "--name value" pair to the options; false if the name is unknown.
bool apply_flag(es::demo::Options& o, std::string_view name, const std::string& v) {
  if (name == "--hidden") o.hidden = std::stoll(v);
  else if (name == "--population") o.es.population = std::stoi(v);
  else if (name == "--sigma") o.es.sigma = std::stof(v);
  else if (name == "--lr") o.es.learning_rate = std::stof(v);
  else if (name == "--weight-decay") o.es.weight_decay = std::stof(v);
  else if (name == "--iterations") o.max_iterations = std::stoll(v);
  else if (name == "--threads") o.es.threads = std::stoi(v);
  else if (name == "--seed") o.es.seed = std::stoull(v);
  else if (name == "--target") o.target = std::stod(v);
  else if (name == "--points") o.points_per_class = std::stoll(v);
  else if (name == "--latent") o.latent = std::stof(v);
  else return false;
  return true;
}

// The whole command line of an ES spirals demo: flags, progress, the no-autograd check.
inline int es_demo_main(int argc, char** argv, es::demo::Options opt, std::string_view name, std::string_view model) {
  try {
    for (int i = 1; i + 1 < argc; i += 2)
      if (!apply_flag(opt, argv[i], argv[i + 1])) {
        fmt::print(stderr, "unknown option {}\n", argv[i]);
        return 2;
      }
    Context ctx({.threads = opt.es.threads});
    // No backward anywhere: ES must not create a single autograd node.
    const std::uint64_t nodes_before = autograd::nodes_created();
    fmt::print("{}: 2-{}-{}-2 tanh MLP{}, {} points, N={} antithetic, sigma={}, lr={}, {} threads\n", name, opt.hidden,
               opt.hidden, model, 2 * opt.points_per_class, opt.es.population, opt.es.sigma, opt.es.learning_rate, ctx.threads());
    const auto res = es::demo::run(ctx, opt, [](const es::demo::Progress& p) {
      fmt::print("iter {:5d}  member reward {:8.4f}  loss {:.4f}  acc {:6.2f}%  {:6.2f}s\n", p.iteration, p.reward_mean, p.loss,
                 100 * p.accuracy, p.seconds);
    });
    if (autograd::nodes_created() != nodes_before) {
      fmt::print("FAILED: ES created {} autograd nodes\n", autograd::nodes_created() - nodes_before);
      return 1;
    }
    fmt::print("autograd nodes created: 0\n");
    fmt::print("params {}  final train accuracy {:.2f}%  test accuracy {:.2f}%  iterations {}  {:.2f}s ({:.2f} ms/iter)\n",
               res.params, 100 * res.last.accuracy, 100 * res.test_accuracy, res.last.iteration, res.last.seconds,
               1e3 * res.last.seconds / static_cast<double>(res.last.iteration));
    if (res.reached_at < 0) {
      fmt::print("FAILED: {:.2f}% < target {:.2f}%\n", 100 * res.last.accuracy, 100 * opt.target);
      return 1;
    }
    fmt::print("reached {:.2f}% at iteration {} in {:.2f}s\n", 100 * opt.target, res.reached_at, res.reached_seconds);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace es_demo_cli
