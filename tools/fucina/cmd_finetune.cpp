// fucina finetune: LoRA or full-parameter training of a GGUF model (train/finetune.hpp).
#include <fmt/core.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <string_view>

#include "args.hpp"
#include "command.hpp"
#include "fucina/core/atomic_file.hpp"
#include "fucina/tokenizer/tokenizer.hpp"
#include "fucina/train/finetune.hpp"

namespace {

using fucina::cli::parse_num;
using fucina::cli::UsageError;
namespace fs = std::filesystem;
namespace tr = fucina::train;

constexpr std::string_view usage =
    "usage: fucina finetune BASE.gguf --data TRAIN -o OUT.gguf [options]\n"
    "\n"
    "Trains BASE on TRAIN and writes OUT: with --lora, a LoRA adapter in llama.cpp's format\n"
    "(load it with `fucina run --lora`, `llama-cli --lora`, merge it with `fucina export-lora`);\n"
    "without, every weight is trained (f32, f16 or BF16 bases) and OUT is the whole model in the\n"
    "base's types. Training runs the same forward and kernels as `fucina run`.\n"
    "\n"
    "TRAIN: a .jsonl file of {\"messages\": [...]} (chat template; loss on assistant turns),\n"
    "{\"prompt\", \"completion\"} (loss on the completion) or {\"text\"} lines; any other file is\n"
    "plain text cut into --ctx windows.\n"
    "\n"
    "options (defaults in brackets):\n"
    "  --data FILE             training data (required)\n"
    "  -o, --output FILE       the adapter or model to write (required; written whole or not at all)\n"
    "  --lora                  train a LoRA adapter (frozen base, any weight type)\n"
    "  --rank N                LoRA rank [8]\n"
    "  --alpha F               LoRA alpha: scale = alpha / rank [16]\n"
    "  --lora-targets LIST     matrices to adapt: q,k,v,o,gate,up,down or all [q,k,v,o]\n"
    "  --lr F                  peak learning rate [1e-4]\n"
    "  --weight-decay F        decoupled weight decay [0]\n"
    "  --optimizer NAME        adamw | muon | sgd | apollo [adamw]\n"
    "  --epochs N              passes over the data [1]\n"
    "  --steps N               optimizer steps instead of epochs\n"
    "  --batch N               sequences per step [1]\n"
    "  -c, --ctx N             tokens per sequence; longer examples are truncated [512, at\n"
    "                          most the model's context]\n"
    "  --warmup N              linear warmup steps [0]\n"
    "  --schedule NAME         cosine | constant (after warmup) [cosine]\n"
    "  --grad-clip F           clip the global gradient norm; 0 = off [1.0]\n"
    "  --grad-checkpoint       recompute each block in backward: less memory, ~1/3 more time\n"
    "  --val FILE              validation data (same formats)\n"
    "  --val-split F           hold out this fraction of TRAIN for validation [0]\n"
    "  --val-every N           validation loss every N steps [at checkpoints and the end]\n"
    "  --seed S                data order and LoRA initialisation [0]\n"
    "  --checkpoint-dir DIR    where checkpoints go [OUT.checkpoint]\n"
    "  --checkpoint-every N    save a checkpoint every N steps [0: only on Ctrl-C]\n"
    "  --resume                continue from DIR's checkpoint, bit-exactly (same options)\n"
    "  -t, --threads N         worker threads [all cores]\n"
    "  -h, --help              this help\n"
    "\n"
    "Progress: one line per step (loss, learning rate, tokens/s, ETA) on stderr. Ctrl-C saves a\n"
    "checkpoint and exits (status 130); run the same command with --resume to continue.\n";

std::atomic<bool> g_stop{false};
extern "C" void on_sigint(int) { g_stop.store(true); }

std::string duration(double s) {
  const auto t = static_cast<long long>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, t / 60 % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

int finetune_main(std::span<char* const> args) {
  std::string base, data, out, val, ckpt_dir;
  tr::FinetuneOptions opt;
  std::int64_t ctx_len = 512, val_every = 0, ckpt_every = 0;
  double val_split = 0;
  bool resume = false;
  int threads = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw UsageError{fmt::format("{} needs a value", a)};
      return args[++i];
    };
    const auto positive = [&](std::int64_t v) {
      if (v < 1) throw UsageError{fmt::format("{} must be at least 1, got {}", a, v)};
      return v;
    };
    if (a == "-h" || a == "--help") {
      fmt::print("{}", usage);
      return 0;
    }
    if (a == "--data") data = value();
    else if (a == "-o" || a == "--output") out = value();
    else if (a == "--lora") opt.lora = true;
    else if (a == "--rank") opt.lora_spec.rank = positive(parse_num<std::int64_t>(a, value()));
    else if (a == "--alpha") opt.lora_spec.alpha = parse_num<float>(a, value());
    else if (a == "--lora-targets") opt.lora_spec.targets = fucina::model::parse_lora_targets(value());
    else if (a == "--lr") opt.lr = parse_num<double>(a, value());
    else if (a == "--weight-decay") opt.weight_decay = parse_num<double>(a, value());
    else if (a == "--optimizer") opt.optimizer = value();
    else if (a == "--epochs") opt.epochs = positive(parse_num<std::int64_t>(a, value()));
    else if (a == "--steps") opt.steps = positive(parse_num<std::int64_t>(a, value()));
    else if (a == "--batch") opt.batch = positive(parse_num<std::int64_t>(a, value()));
    else if (a == "-c" || a == "--ctx") ctx_len = positive(parse_num<std::int64_t>(a, value()));
    else if (a == "--warmup") opt.warmup = parse_num<std::int64_t>(a, value());
    else if (a == "--schedule") opt.schedule = value();
    else if (a == "--grad-clip") opt.grad_clip = parse_num<double>(a, value());
    else if (a == "--grad-checkpoint") opt.grad_checkpoint = true;
    else if (a == "--val") val = value();
    else if (a == "--val-split") val_split = parse_num<double>(a, value());
    else if (a == "--val-every") val_every = positive(parse_num<std::int64_t>(a, value()));
    else if (a == "--seed") opt.seed = parse_num<std::uint64_t>(a, value());
    else if (a == "--checkpoint-dir") ckpt_dir = value();
    else if (a == "--checkpoint-every") ckpt_every = positive(parse_num<std::int64_t>(a, value()));
    else if (a == "--resume") resume = true;
    else if (a == "-t" || a == "--threads") threads = fucina::cli::parse_threads(a, value());
    else if (a.size() > 1 && a[0] == '-') throw UsageError{fmt::format("unknown option '{}' (see fucina finetune --help)", a)};
    else if (base.empty()) base = std::string(a);
    else throw UsageError{fmt::format("unexpected argument '{}' (see fucina finetune --help)", a)};
  }
  if (base.empty()) throw UsageError{"no base model given (see fucina finetune --help)"};
  if (data.empty()) throw UsageError{"no training data given: pass --data FILE"};
  if (out.empty()) throw UsageError{"no output given: pass -o OUT.gguf"};
  if (!val.empty() && val_split > 0) throw UsageError{"--val and --val-split exclude each other"};
  opt.lora_spec.seed = opt.seed;
  // Refuse an output that would overwrite an input before any work.
  const std::vector<fs::path> inputs{base, data, val};
  fucina::check_output_path(out, inputs);
  const fs::path ckpt = fs::path(ckpt_dir.empty() ? out + ".checkpoint" : ckpt_dir) / "finetune.state";

  fucina::Context ctx({.threads = threads, .max_cached_bytes = std::size_t{4} << 30});  // before the model: it holds the adapters ctx allocates
  auto model = fucina::model::Model::load(base);
  const fucina::tokenizer::Tokenizer tok(fucina::tokenizer::load_tokenizer_data(model.file()));
  const std::int64_t ctx_max = model.config().n_ctx_train;
  if (ctx_len > ctx_max) {
    fmt::print(stderr, "fucina finetune: --ctx {} is above the model's context {}; using {}\n", ctx_len, ctx_max, ctx_max);
    ctx_len = ctx_max;
  }
  tr::Dataset train = tr::load_dataset(data, model.file(), tok, ctx_len);
  tr::Dataset validation;
  if (!val.empty()) validation = tr::load_dataset(val, model.file(), tok, ctx_len);
  if (val_split > 0) std::tie(train, validation) = tr::split_validation(std::move(train), val_split, opt.seed);
  const auto& st = train.stats;
  fmt::print(stderr, "fucina finetune: {} examples, {} tokens ({} trained on){}{}\n", train.examples.size(), st.tokens,
             st.loss_tokens, st.truncated ? fmt::format(", {} truncated to {} tokens", st.truncated, ctx_len + 1) : "",
             st.skipped ? fmt::format(", {} skipped (no target tokens)", st.skipped) : "");

  tr::Finetune ft(ctx, model, std::move(train), opt);
  if (resume) {
    if (!fs::exists(ckpt)) throw UsageError{fmt::format("--resume: no checkpoint at {}", ckpt.string())};
    ft.load_checkpoint(ckpt);
    fmt::print(stderr, "fucina finetune: resumed {} at step {} of {}\n", ckpt.string(), ft.step(), ft.total_steps());
  }
  const auto save = [&] {
    fs::create_directories(ckpt.parent_path());
    ft.save_checkpoint(ckpt);
  };
  const auto validate = [&]() -> std::string {
    if (validation.examples.empty()) return {};
    return fmt::format("  val loss {:.4f}", ft.evaluate(validation));
  };

  g_stop.store(false);
  const auto old_handler = std::signal(SIGINT, on_sigint);
  const bool tty = ::isatty(STDERR_FILENO);
  const std::int64_t first = ft.step();
  double secs = 0, first_loss = -1, last_loss = 0;
  std::int64_t tokens = 0;
  while (ft.step() < ft.total_steps() && !g_stop.load()) {
    const tr::StepReport r = ft.run_step();
    secs += r.seconds, tokens += r.tokens, last_loss = r.loss;
    if (first_loss < 0) first_loss = r.loss;
    std::string extra;
    if (ckpt_every > 0 && r.step % ckpt_every == 0 && r.step < r.total) {
      save();
      extra += validate() + "  (checkpoint)";
    } else if (val_every > 0 && r.step % val_every == 0) {
      extra += validate();
    }
    const double eta = secs / static_cast<double>(r.step - first) * static_cast<double>(r.total - r.step);
    fmt::print(stderr, "{}step {}/{}  loss {:.4f}  lr {:.3g}  {:.0f} tok/s  ETA {}{}{}", tty ? "\r\033[K" : "", r.step,
               r.total, r.loss, r.lr, static_cast<double>(r.tokens) / r.seconds, duration(eta), extra,
               tty && extra.empty() && r.step < r.total ? "" : "\n");
  }
  std::signal(SIGINT, old_handler);
  if (g_stop.load() && ft.step() < ft.total_steps()) {
    save();
    fmt::print(stderr, "\nfucina finetune: interrupted at step {} of {}; checkpoint saved to {}\n"
               "  continue with the same command and --resume\n", ft.step(), ft.total_steps(), ckpt.string());
    return 130;
  }
  const std::string val_line = validate();
  ft.write_output(out);
  fmt::print(stderr, "fucina finetune: {} steps in {} ({:.0f} tok/s), loss {:.4f} -> {:.4f}{}; wrote {}\n",
             ft.step() - first, duration(secs), secs > 0 ? static_cast<double>(tokens) / secs : 0.0, first_loss, last_loss,
             val_line, out);
  return 0;
}

const fucina::cli::Command reg("finetune", "train a LoRA adapter or every weight of a model on your data", finetune_main);

}  // namespace
