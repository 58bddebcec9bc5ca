// fucina synth: write a random-weight model of a real architecture (Note [Synthetic models]).
#include <fmt/core.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

#include "args.hpp"
#include "command.hpp"
#include "fucina/core/error.hpp"
#include "fucina/core/thread_pool.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/model/lora.hpp"
#include "fucina/model/synth.hpp"

namespace {

using fucina::cli::parse_num;
using fucina::cli::parse_threads;
using fucina::cli::UsageError;
namespace fm = fucina::model;

constexpr std::string_view usage =
    "usage: fucina synth OUT.gguf --arch llama|qwen3|qwen3moe [options]\n"
    "\n"
    "Writes a model of a real architecture with random weights (its text is gibberish by\n"
    "design): for trying `fucina run` and for benchmarks at real shapes. The file is a pure\n"
    "function of the options. Matrices ~ N(0, std^2), norms ~ 1 + 0.1 N(0,1).\n"
    "\n"
    "options (defaults in brackets):\n"
    "  --vocab FILE.gguf      copy the tokenizer (tokenizer.* keys) from FILE; default: a\n"
    "                         built-in 354-token byte-level SPM vocabulary\n"
    "  --hidden N             embedding width [64]\n"
    "  --layers N             blocks [2]\n"
    "  --heads N              attention heads [4]\n"
    "  --kv-heads N           key/value heads, must divide --heads [2]\n"
    "  --head-dim N           per-head width [hidden / heads]\n"
    "  --ffn N                FFN width [172]\n"
    "  --experts N            qwen3moe: experts [8]\n"
    "  --experts-used N       qwen3moe: experts per token [2]\n"
    "  --expert-ffn N         qwen3moe: one expert's FFN width [64]\n"
    "  --ctx N                training context length [512]\n"
    "  --rope-base F          RoPE frequency base [10000]\n"
    "  --eps F                RMSNorm epsilon [1e-6]\n"
    "  --tied                 no output.weight: the token embedding is the output projection\n"
    "  --dtype f32|f16|bf16   matrix type (norms stay f32) [f32]\n"
    "  --std F                matrix weight std [1/sqrt(hidden)]\n"
    "  --q4k-experts          qwen3moe: routed experts as random Q4_K blocks (fast; for\n"
    "                         --moe-stream benchmarks on files larger than memory)\n"
    "  --seed S               random seed [0]\n"
    "  -t, --threads N        worker threads [all cores; the output does not depend on it]\n"
    "  -h, --help             this help\n"
    "\n"
    "A random LoRA adapter instead of a model (for tests and parity goldens; A ~ N(0, 1/n_in),\n"
    "B ~ N(0, 0.05^2), so merging it changes the weights):\n"
    "  fucina synth ADAPTER.gguf --lora-for BASE.gguf [--rank 8] [--alpha 16]\n"
    "    [--lora-targets q,k,v,o] [--seed S]\n"
    "  targets: any of q, k, v, o, gate, up, down\n"
    "\n"
    "example (Qwen3-0.6B's shape, with Qwen's tokenizer):\n"
    "  fucina synth q3.gguf --arch qwen3 --hidden 1024 --layers 28 --heads 16 --kv-heads 8 \\\n"
    "    --head-dim 128 --ffn 3072 --ctx 4096 --rope-base 1000000 --tied --dtype f16 \\\n"
    "    --vocab ggml-vocab-qwen2.gguf\n";

double mib(std::uintmax_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

int synth_main(std::span<char* const> args) {
  fm::SynthSpec spec;
  std::string out;
  bool have_arch = false;
  int threads = 0;
  std::string lora_for;
  fm::RandomLoraSpec lora;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const auto value = [&] { return fucina::cli::flag_value(args, i); };
    if (fucina::cli::help_requested(a, usage)) return 0;
    if (a == "--arch") spec.arch = value(), have_arch = true;
    else if (a == "--vocab") spec.vocab_from = value();
    else if (a == "--hidden") spec.n_embd = parse_num<std::int64_t>(a, value());
    else if (a == "--layers") spec.n_layer = parse_num<std::int64_t>(a, value());
    else if (a == "--heads") spec.n_head = parse_num<std::int64_t>(a, value());
    else if (a == "--kv-heads") spec.n_head_kv = parse_num<std::int64_t>(a, value());
    else if (a == "--head-dim") spec.head_dim = parse_num<std::int64_t>(a, value());
    else if (a == "--ffn") spec.n_ff = parse_num<std::int64_t>(a, value());
    else if (a == "--experts") spec.n_expert = parse_num<std::int64_t>(a, value());
    else if (a == "--experts-used") spec.n_expert_used = parse_num<std::int64_t>(a, value());
    else if (a == "--expert-ffn") spec.n_ff_exp = parse_num<std::int64_t>(a, value());
    else if (a == "--ctx") spec.n_ctx = parse_num<std::int64_t>(a, value());
    else if (a == "--rope-base") spec.rope_base = parse_num<float>(a, value());
    else if (a == "--eps") spec.rms_eps = parse_num<float>(a, value());
    else if (a == "--std") spec.std = parse_num<float>(a, value());
    else if (a == "--seed") spec.seed = parse_num<std::uint64_t>(a, value());
    else if (a == "--tied") spec.tied = true;
    else if (a == "--q4k-experts") spec.q4_k_experts = true;
    else if (a == "--lora-for") lora_for = value();
    else if (a == "--rank") lora.rank = parse_num<std::int64_t>(a, value());
    else if (a == "--alpha") lora.alpha = parse_num<float>(a, value());
    else if (a == "--lora-targets") lora.targets = value();
    else if (a == "-t" || a == "--threads") threads = parse_threads(a, value());
    else if (a == "--dtype") {
      const std::string d = value();
      if (d == "f32") spec.dtype = fucina::DType::f32;
      else if (d == "f16") spec.dtype = fucina::DType::f16;
      else if (d == "bf16") spec.dtype = fucina::DType::bf16;
      else throw UsageError{fmt::format("--dtype must be f32, f16 or bf16, not '{}'", d)};
    } else if (a.size() > 1 && a[0] == '-') {
      throw UsageError{fmt::format("unknown option '{}' (see fucina synth --help)", a)};
    } else if (out.empty()) {
      out = std::string(a);
    } else {
      throw UsageError{fmt::format("unexpected argument '{}' (see fucina synth --help)", a)};
    }
  }
  if (out.empty()) throw UsageError{"no output file given (usage: fucina synth OUT.gguf --arch A [options])"};
  if (!lora_for.empty()) {
    if (lora.rank < 1) throw UsageError{fmt::format("--rank must be at least 1, got {}", lora.rank)};
    lora.seed = spec.seed;
    const auto base = fucina::gguf::Reader::open(lora_for);
    const auto adapter = fm::random_lora(base, lora);
    fm::write_lora(out, adapter);
    fmt::print(stderr, "fucina synth: wrote {}: LoRA adapter for {}, {} matrices, rank {}, alpha {}\n", out, lora_for,
               adapter.matrices.size(), lora.rank, lora.alpha);
    return 0;
  }
  if (!have_arch) throw UsageError{"--arch is required: llama, qwen3 or qwen3moe"};
  try {
    fm::check_synth_spec(spec);
  } catch (const fucina::Error& e) {
    std::string_view m = e.what();
    if (m.starts_with("[synth] ")) m.remove_prefix(8);
    throw UsageError{std::string(m)};
  }

  const auto t0 = std::chrono::steady_clock::now();
  fucina::ThreadPool pool(threads);
  fm::write_synthetic_model(out, spec, pool);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const auto file = fucina::gguf::Reader::open(out);
  std::int64_t params = 0;
  for (const auto& t : file.tensors()) params += t.n_elements();
  const auto n_vocab = file.get_array_view("tokenizer.ggml.tokens").size();
  fmt::print(stderr, "fucina synth: wrote {}: {}, {:.2f}M params, vocab {}, {} matrices, {:.1f} MiB in {:.2f} s\n", out,
             spec.arch, static_cast<double>(params) / 1e6, n_vocab, fucina::dtype_name(spec.dtype),
             mib(std::filesystem::file_size(out)), secs);
  return 0;
}

const fucina::cli::Command reg("synth", "write a random-weight model of a real architecture (llama, qwen3, qwen3moe)",
                               synth_main);

}  // namespace
