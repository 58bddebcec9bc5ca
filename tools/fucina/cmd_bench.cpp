// fucina bench: prompt-processing (pp) and token-generation (tg) speed, measured the way
// llama-bench measures it, so the two tables can be compared line by line.
//
// Note [Bench protocol]: a pp test runs N random token ids in batches of -b; a tg test
// decodes N tokens one at a time, feeding each generated id back. Both start from a cache
// holding -d (depth) positions of random ids, prefilled once per test and untimed (the cache
// is cut back to them before every run, as llama-bench restores its saved state); depth 0 is
// an empty cache. The cache holds depth + N positions (llama-bench's n_ctx), which also picks
// the split of Note [split decode]. One untimed warm-up run precedes the -r timed
// repetitions (as llama-bench does), and tokens/s is averaged over repetitions with its
// sample stdev.
//
// Note [Batched bench]: --parallel 1,2,4,8 measures as llama-batched-bench does (-npp -p,
// -ntg -n, -npl --parallel): pl sequences of one PagedKvCache each read a prompt of pp
// random tokens (all pl·pp rows in forward_batch steps of at most -b rows), then generate
// tg tokens together, pl rows per step (random ids, as it does). Records carry its names:
// pp, tg, pl, n_kv = pl·(pp + tg), t_pp / t_tg / t in seconds, speed_pp = pl·pp / t_pp,
// speed_tg = pl·tg / t_tg, speed = n_kv / t; times are means over -r repetitions after
// one untimed warm-up run.
//
// Note [Speculative bench]: with --spec a tg test decodes its N tokens through
// generate::Generator with speculative decoding (greedy, Note [Speculative decoding]) from
// the same one random token; a random-weight model's greedy text soon loops, so the drafts
// find it. Records add verify_steps and accepted_per_step (drafted tokens accepted per
// verification).
#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <utility>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.hpp"
#include "command.hpp"
#include "fucina/core/rng.hpp"
#include "fucina/model/expert_store.hpp"
#include "fucina/generate/generator.hpp"
#include "fucina/model/model.hpp"
#include "fucina/quant/quantize_model.hpp"

namespace {

using fucina::cli::parse_list;
using fucina::cli::parse_load_flag;
using fucina::cli::parse_kv_flag;
using fucina::cli::parse_num;
using fucina::cli::check_threads;
using fucina::cli::UsageError;

constexpr std::string_view usage =
    "usage: fucina bench MODEL.gguf [options]   (several models: -m A -m B)\n"
    "  -m, --model FILE         model to measure (repeatable)\n"
    "  -p, --n-prompt N[,N..]   prompt-processing tests (default 512; 0 = none)\n"
    "  -n, --n-gen N[,N..]      token-generation tests (default 128; 0 = none)\n"
    "  -d, --n-depth N[,N..]    context already in the cache before each test (default 0)\n"
    "  -r, --repetitions R      timed repetitions per test (default 5)\n"
    "  -t, --threads N[,N..]    worker threads (default: all cores)\n"
    "  -b, --batch N            prompt batch size (default 512)\n"
    "  --kv-type f16|f32|q8_0   KV cache element type (default f16; also -ctk/-ctv T)\n"
    "  --no-warmup              skip the untimed warm-up run\n"
    "  --spec                   tg tests through speculative decoding (greedy); reports the\n"
    "                           drafted tokens accepted per verification\n"
    "  --fast-prefill           quantized prompts through the f32 GEMM (not bit-exact)\n"
    "  --no-repack              use the weights in the mapped file as they are (no interleaved\n"
    "                           quantized layout, no huge-page copy)\n"
    "  --parallel N[,N..]       batched decode like llama-batched-bench: N sequences each\n"
    "                           read a -p prompt and generate -n tokens together\n"
    "  -o, --output md|json     output format (default md)\n";

struct Options {
  std::vector<std::string> models;
  std::vector<std::int64_t> n_prompt{512}, n_gen{128}, n_depth{0};
  std::vector<int> threads;
  std::vector<std::int64_t> parallel;  // non-empty: Note [Batched bench]
  int reps = 5;
  std::int64_t batch = 512;
  bool warmup = true, json = false;
  bool spec = false;  // Note [Speculative bench]
  fucina::model::LoadOptions load;
  fucina::cli::KvFlags kv;
};

Options parse(std::span<char* const> args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw UsageError{fmt::format("{} needs a value", a)};
      return args[++i];
    };
    if (a == "-m" || a == "--model") o.models.push_back(value());
    else if (a == "-p" || a == "--n-prompt") o.n_prompt = parse_list<std::int64_t>(a, value());
    else if (a == "-n" || a == "--n-gen") o.n_gen = parse_list<std::int64_t>(a, value());
    else if (a == "-d" || a == "--n-depth") o.n_depth = parse_list<std::int64_t>(a, value());
    else if (a == "-r" || a == "--repetitions") o.reps = parse_num<int>(a, value());
    else if (a == "-t" || a == "--threads") o.threads = parse_list<int>(a, value());
    else if (a == "-b" || a == "--batch") o.batch = parse_num<std::int64_t>(a, value());
    else if (a == "--no-warmup") o.warmup = false;
    else if (a == "--spec") o.spec = true;
    else if (a == "--parallel") o.parallel = parse_list<std::int64_t>(a, value());
    else if (parse_load_flag(args, i, o.load)) {}  // --fast-prefill, --no-repack, --moe-*
    else if (a == "-o" || a == "--output") {
      const std::string f = value();
      if (f != "md" && f != "json") throw UsageError{fmt::format("--output must be md or json, not '{}'", f)};
      o.json = f == "json";
    } else if (parse_kv_flag(a, value, o.kv)) {  // --kv-type, -ctk, -ctv
    } else if (a.size() > 1 && a[0] == '-') throw UsageError{fmt::format("unknown option '{}' (see fucina bench --help)", a)};
    else o.models.emplace_back(a);
  }
  if (o.reps < 1) throw UsageError{fmt::format("--repetitions must be at least 1, got {}", o.reps)};
  if (o.batch < 1) throw UsageError{fmt::format("--batch must be at least 1, got {}", o.batch)};
  for (auto n : o.n_prompt)
    if (n < 0) throw UsageError{fmt::format("-p must be >= 0, got {}", n)};
  for (auto n : o.n_gen)
    if (n < 0) throw UsageError{fmt::format("-n must be >= 0, got {}", n)};
  for (auto n : o.n_depth)
    if (n < 0) throw UsageError{fmt::format("-d must be >= 0, got {}", n)};
  for (auto n : o.parallel)
    if (n < 1) throw UsageError{fmt::format("--parallel must be at least 1, got {}", n)};
  if (!o.parallel.empty() && (o.n_prompt.size() != 1 || o.n_gen.size() != 1 || o.n_gen[0] < 1))
    throw UsageError{"--parallel takes one -p and one -n (>= 1)"};
  if (!o.parallel.empty() && (o.n_depth.size() != 1 || o.n_depth[0] != 0))
    throw UsageError{"--parallel does not take -d (llama-batched-bench has no depth)"};
  if (o.spec && !o.parallel.empty()) throw UsageError{"--spec measures one sequence; it does not combine with --parallel"};
  if (o.spec && (o.n_depth.size() != 1 || o.n_depth[0] != 0)) throw UsageError{"--spec does not take -d"};
  for (int& t : o.threads) t = check_threads("--threads", t);
  if (o.threads.empty()) o.threads.push_back(0);
  return o;
}

struct Record {
  std::string model_filename, model_type;
  std::uint64_t model_size = 0, model_n_params = 0;
  int n_threads = 0;
  std::int64_t n_prompt = 0, n_gen = 0, n_depth = 0, n_batch = 0;
  std::vector<double> samples_ns, samples_ts;
  double avg_ts = 0, stddev_ts = 0;
  bool spec = false;  // Note [Speculative bench]: summed over the timed repetitions
  std::int64_t verify_steps = 0, accepted = 0;
  double accepted_per_step() const { return verify_steps > 0 ? static_cast<double>(accepted) / static_cast<double>(verify_steps) : 0.0; }
};

// Mean and sample standard deviation of tokens/s over the repetitions.
void summarize(Record& r) {
  const double n_tok = static_cast<double>(r.n_prompt + r.n_gen);
  auto& ts = r.samples_ts;
  ts.clear();
  for (double ns : r.samples_ns) ts.push_back(n_tok * 1e9 / ns);
  double mean = 0;
  for (double v : ts) mean += v;
  mean /= static_cast<double>(ts.size());
  double var = 0;
  for (double v : ts) var += (v - mean) * (v - mean);
  r.avg_ts = mean;
  r.stddev_ts = ts.size() > 1 ? std::sqrt(var / static_cast<double>(ts.size() - 1)) : 0.0;
}

std::vector<std::int32_t> random_ids(std::int64_t n, std::int64_t vocab, std::uint64_t seed) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    ids[static_cast<std::size_t>(i)] =
        static_cast<std::int32_t>(fucina::rng::splitmix64(seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(i)) %
                                  static_cast<std::uint64_t>(vocab));
  return ids;
}

// One timed run of a test from the cache cut back to its depth; returns nanoseconds.
double run_once(const fucina::model::Model& model, fucina::Context& ctx, const Options& o, fucina::model::KvCache& cache,
                std::int64_t depth, std::int64_t n_prompt, std::int64_t n_gen, std::uint64_t seed) {
  const std::int64_t vocab = model.config().n_vocab;
  cache.truncate(depth);
  const auto t0 = std::chrono::steady_clock::now();
  if (n_prompt > 0) {
    const auto ids = random_ids(n_prompt, vocab, seed);
    (void)model.prefill(ctx, cache, ids, o.batch);
  } else {
    std::int32_t next = random_ids(1, vocab, seed)[0];
    for (std::int64_t i = 0; i < n_gen; ++i) {
      const std::int32_t one[1] = {next};
      auto logits = model.forward(ctx, cache, one);
      next = static_cast<std::int32_t>(argmax<"vocab">(ctx, logits).item());
    }
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

// One timed tg run of Note [Speculative bench]; returns nanoseconds, adds its counts to r.
double run_spec_once(const fucina::model::Model& model, const fucina::tokenizer::Tokenizer& tok, fucina::Context& ctx,
                     const Options& o, std::int64_t n_gen, std::uint64_t seed, Record* r) {
  namespace gen = fucina::generate;
  gen::Generator g(model, tok, ctx, {.n_ctx = n_gen + 1, .kv_type = o.kv.type, .sampling = {.temperature = 0.f}});
  const auto t0 = std::chrono::steady_clock::now();
  g.feed_prompt(random_ids(1, model.config().n_vocab, seed));
  const auto result = g.generate({.max_tokens = n_gen, .ignore_eos = true});
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  if (r) r->verify_steps += result.timings.verify_steps, r->accepted += result.timings.accepted;
  return ns;
}

struct BatchedRecord {
  std::string model_filename, model_type;
  int n_threads = 0;
  std::int64_t n_batch = 0, pp = 0, tg = 0, pl = 0;
  double t_pp = 0, t_tg = 0;  // seconds, mean over repetitions
};

// One run of Note [Batched bench]; returns {t_pp, t_tg} in seconds.
std::pair<double, double> run_batched(const fucina::model::Model& model, fucina::Context& ctx, const Options& o,
                                      std::int64_t pp, std::int64_t tg, std::int64_t pl, std::uint64_t seed) {
  using Chunk = fucina::model::Model::SeqChunk;
  const std::int64_t vocab = model.config().n_vocab;
  auto cache = model.new_paged_cache(fucina::model::PagedKvCache::budget_for(pl, pp + tg), pp + tg, o.kv.type);
  std::vector<fucina::model::SeqId> seqs;
  std::vector<std::vector<std::int32_t>> prompts;
  for (std::int64_t j = 0; j < pl; ++j) {
    seqs.push_back(cache.open());
    prompts.push_back(random_ids(pp, vocab, seed * 1000 + static_cast<std::uint64_t>(j)));
  }
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  std::vector<Chunk> step;
  std::int64_t rows = 0;
  for (std::int64_t j = 0; j < pl; ++j)  // the pl·pp prompt rows in steps of at most n_batch
    for (std::int64_t i = 0; i < pp;) {
      const std::int64_t n = std::min(pp - i, o.batch - rows);
      const auto u = static_cast<std::size_t>(j);
      step.push_back({seqs[u], std::span(prompts[u]).subspan(static_cast<std::size_t>(i), static_cast<std::size_t>(n))});
      rows += n, i += n;
      if (rows == o.batch || (j + 1 == pl && i == pp)) {
        (void)model.forward_batch(ctx, cache, step);
        step.clear();
        rows = 0;
      }
    }
  const auto t1 = clock::now();
  const auto ids = random_ids(pl * tg, vocab, seed + 77);
  for (std::int64_t i = 0; i < tg; ++i) {
    for (std::int64_t j = 0; j < pl; ++j)
      step.push_back({seqs[static_cast<std::size_t>(j)], std::span(ids).subspan(static_cast<std::size_t>(i * pl + j), 1)});
    (void)model.forward_batch(ctx, cache, step);
    step.clear();
  }
  const auto t2 = clock::now();
  return {std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count()};
}

nlohmann::json batched_fields(const BatchedRecord& r) {
  const std::int64_t n_kv = r.pl * (r.pp + r.tg);
  const double t = r.t_pp + r.t_tg;
  const auto per = [](double n, double s) { return s > 0 ? n / s : 0.0; };
  return {{"model_filename", r.model_filename}, {"model_type", r.model_type},
          {"n_batch", r.n_batch},              {"n_threads", r.n_threads},
          {"pp", r.pp},                        {"tg", r.tg},
          {"pl", r.pl},                        {"n_kv", n_kv},
          {"t_pp", r.t_pp},                    {"speed_pp", per(static_cast<double>(r.pl * r.pp), r.t_pp)},
          {"t_tg", r.t_tg},                    {"speed_tg", per(static_cast<double>(r.pl * r.tg), r.t_tg)},
          {"t", t},                            {"speed", per(static_cast<double>(n_kv), t)}};
}

void print_batched(const std::vector<BatchedRecord>& recs, bool json) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : recs) out.push_back(batched_fields(r));
  if (json) {
    fmt::print("{}\n", out.dump(2));
    return;
  }
  fmt::print("| model | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |\n"
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const auto& j : out)
    fmt::print("| {} | {} | {} | {} | {} | {:.3f} | {:.2f} | {:.3f} | {:.2f} | {:.3f} | {:.2f} |\n",
               j["model_type"].get<std::string>(), j["pp"].get<std::int64_t>(), j["tg"].get<std::int64_t>(),
               j["pl"].get<std::int64_t>(), j["n_kv"].get<std::int64_t>(), j["t_pp"].get<double>(),
               j["speed_pp"].get<double>(), j["t_tg"].get<double>(), j["speed_tg"].get<double>(), j["t"].get<double>(),
               j["speed"].get<double>());
}

std::uint64_t n_params(const fucina::gguf::Reader& f) {
  std::uint64_t n = 0;
  for (const auto& t : f.tensors()) {
    std::uint64_t e = 1;
    for (auto d : t.shape()) e *= static_cast<std::uint64_t>(d);
    n += e;
  }
  return n;
}

// "F16", "Q4_K_M", ... from general.file_type, as llama-bench names a model.
std::string file_type_name(const fucina::gguf::Reader& f) {
  if (!f.contains("general.file_type")) return "?";
  const auto ft = static_cast<fucina::quant::FileType>(f.get_u32("general.file_type"));
  if (ft == fucina::quant::FileType::AllF32) return "F32";
  for (const auto& t : fucina::quant::quantize_targets())
    if (t.ftype == ft && !t.copy_only) return std::string(t.name);
  return fmt::format("ftype {}", static_cast<std::uint32_t>(ft));
}

// "pp512", "tg128 @ d4096": llama-bench's test names.
std::string test_name(const Record& r) {
  std::string t = r.n_prompt > 0 ? fmt::format("pp{}", r.n_prompt) : fmt::format("tg{}", r.n_gen);
  if (r.n_depth > 0) t += fmt::format(" @ d{}", r.n_depth);
  if (r.spec) t += fmt::format(" spec ({:.2f} accepted/step)", r.accepted_per_step());
  return t;
}

void print_md(const std::vector<Record>& recs) {
  fmt::print("| model | size | params | threads | test | t/s |\n| --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const auto& r : recs) {
    fmt::print("| {} | {:.2f} MiB | {:.2f} M | {} | {} | {:.2f} ± {:.2f} |\n", r.model_type,
               static_cast<double>(r.model_size) / (1024.0 * 1024.0), static_cast<double>(r.model_n_params) / 1e6,
               r.n_threads, test_name(r), r.avg_ts, r.stddev_ts);
  }
}

void print_json(const std::vector<Record>& recs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : recs) {
    double avg_ns = 0;
    for (double ns : r.samples_ns) avg_ns += ns;
    avg_ns /= static_cast<double>(r.samples_ns.size());
    out.push_back({{"model_filename", r.model_filename},
                   {"model_type", r.model_type},
                   {"model_size", r.model_size},
                   {"model_n_params", r.model_n_params},
                   {"n_batch", r.n_batch},
                   {"n_threads", r.n_threads},
                   {"n_prompt", r.n_prompt},
                   {"n_gen", r.n_gen},
                   {"n_depth", r.n_depth},
                   {"avg_ns", static_cast<std::uint64_t>(avg_ns)},
                   {"avg_ts", r.avg_ts},
                   {"stddev_ts", r.stddev_ts},
                   {"samples_ns", r.samples_ns},
                   {"samples_ts", r.samples_ts}});
    if (r.spec) out.back().update({{"spec", true}, {"verify_steps", r.verify_steps}, {"accepted_per_step", r.accepted_per_step()}});
  }
  fmt::print("{}\n", out.dump(2));
}

// --moe-stream: how the expert cache did over all runs (stderr).
void print_store_stats(const fucina::model::ExpertStoreStats& s) {
  const double mib = 1024.0 * 1024.0, fetches = static_cast<double>(s.hits + s.misses);
  fmt::print(stderr,
             "fucina bench: moe-stream: {} slots of {:.2f} MiB, {} fetches, {:.1f}% from the cache, {} prefetched "
             "({} on the next-layer guess, {} of them used), {:.1f} MiB read at {:.0f} MiB/s per reading thread\n",
             s.slots, static_cast<double>(s.expert_bytes) / mib, s.hits + s.misses,
             fetches > 0 ? 100.0 * static_cast<double>(s.hits) / fetches : 0.0, s.prefetched, s.guesses_read, s.guesses_used,
             static_cast<double>(s.bytes_read) / mib, s.read_seconds > 0 ? static_cast<double>(s.bytes_read) / mib / s.read_seconds : 0.0);
}

int bench_main(std::span<char* const> args) {
  for (const char* a : args)
    if (std::string_view(a) == "-h" || std::string_view(a) == "--help") {
      fmt::print("{}{}", usage, fucina::cli::moe_stream_help);
      return 0;
    }
  const Options o = parse(args);
  if (o.models.empty()) throw UsageError{"no model given (fucina bench MODEL.gguf; see --help)"};
  std::vector<Record> recs;
  std::vector<BatchedRecord> batched;
  for (const auto& path : o.models) {
    const auto model = fucina::model::Model::load(path, o.load);
    const auto& cfg = model.config();
    const std::optional<fucina::tokenizer::Tokenizer> tok =
        o.spec ? std::optional(fucina::tokenizer::Tokenizer(fucina::tokenizer::load_tokenizer_data(model.file()))) : std::nullopt;
    for (int threads : o.threads) {
      fucina::Context ctx({.threads = threads});
      if (!o.parallel.empty()) {
        const std::int64_t pp = o.n_prompt[0], tg = o.n_gen[0];
        for (const std::int64_t pl : o.parallel) {
          BatchedRecord r{.model_filename = path,
                          .model_type = fmt::format("{} {}", fucina::model::arch_name(cfg.arch), file_type_name(model.file())),
                          .n_threads = ctx.threads(), .n_batch = o.batch, .pp = pp, .tg = tg, .pl = pl};
          if (o.warmup) (void)run_batched(model, ctx, o, pp, tg, pl, 0);
          for (int rep = 0; rep < o.reps; ++rep) {
            const auto [t_pp, t_tg] = run_batched(model, ctx, o, pp, tg, pl, static_cast<std::uint64_t>(rep) + 1);
            r.t_pp += t_pp / o.reps, r.t_tg += t_tg / o.reps;
          }
          fmt::print(stderr, "fucina bench: {} pp {} tg {} pl {}: {:.2f} prompt t/s, {:.2f} decode t/s\n", path, pp, tg, pl,
                     batched_fields(r)["speed_pp"].get<double>(), batched_fields(r)["speed_tg"].get<double>());
          batched.push_back(std::move(r));
        }
        continue;
      }
      std::vector<std::pair<std::int64_t, std::int64_t>> tests;
      for (auto n : o.n_prompt)
        if (n > 0) tests.emplace_back(n, 0);
      for (auto n : o.n_gen)
        if (n > 0) tests.emplace_back(0, n);
      for (const auto& [np, ng] : tests)
        for (const std::int64_t depth : o.n_depth) {
          if (depth + np + ng > cfg.n_ctx_train)
            fmt::print(stderr, "fucina bench: note: {} tokens exceed the model's training context {}\n", depth + np + ng,
                       cfg.n_ctx_train);
          Record r;
          r.model_filename = path;
          r.model_type = fmt::format("{} {}", fucina::model::arch_name(cfg.arch), file_type_name(model.file()));
          r.model_size = static_cast<std::uint64_t>(std::filesystem::file_size(path));
          r.model_n_params = n_params(model.file());
          r.n_threads = ctx.threads();
          r.n_prompt = np;
          r.n_gen = ng;
          r.n_depth = depth;
          r.n_batch = o.batch;
          r.spec = o.spec && ng > 0;
          auto cache = model.new_cache(depth + np + ng, o.kv.type);
          if (depth > 0) (void)model.prefill(ctx, cache, random_ids(depth, cfg.n_vocab, 999), o.batch);
          const auto once = [&, np = np, ng = ng](std::uint64_t seed, Record* counted) {  // (clang 14: no bindings in lambdas)
            return r.spec ? run_spec_once(model, *tok, ctx, o, ng, seed, counted)
                          : run_once(model, ctx, o, cache, depth, np, ng, seed);
          };
          if (o.warmup) (void)once(0, nullptr);
          for (int rep = 0; rep < o.reps; ++rep) r.samples_ns.push_back(once(static_cast<std::uint64_t>(rep) + 1, &r));
          summarize(r);
          if (r.spec)
            fmt::print(stderr, "fucina bench: {} tg {} spec: {} verifications, {:.2f} drafted tokens accepted per verification\n",
                       path, ng, r.verify_steps, r.accepted_per_step());
          fmt::print(stderr, "fucina bench: {} {}: {:.2f} ± {:.2f} t/s\n", path, test_name(r), r.avg_ts, r.stddev_ts);
          recs.push_back(std::move(r));
        }
    }
    if (const auto& store = model.weights().layers.front().expert_store) print_store_stats(store->stats());
  }
  if (!o.parallel.empty()) print_batched(batched, o.json);
  else if (o.json) print_json(recs);
  else print_md(recs);
  return 0;
}

const fucina::cli::Command reg{"bench", "measure prompt and generation speed like llama-bench (-o md|json)", bench_main};

}  // namespace
