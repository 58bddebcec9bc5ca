// fucina quantize: convert a GGUF model to another tensor type, byte-identical to llama-quantize.
#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

#include "args.hpp"
#include "command.hpp"
#include "fucina/core/atomic_file.hpp"
#include "fucina/core/thread_pool.hpp"
#include "fucina/gguf/format.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/gguf/writer.hpp"
#include "fucina/quant/quantize_model.hpp"

namespace {

using namespace fucina::quant;
using Clock = std::chrono::steady_clock;

void print_usage() {
  fmt::print(
      "usage: fucina quantize [options] IN.gguf OUT.gguf TYPE\n"
      "\n"
      "Writes IN's tensors converted to TYPE with llama.cpp's per-tensor mix rules (output and\n"
      "token embeddings, attn_v and ffn_down get more bits in the _M mixes; norms and 1-D tensors\n"
      "stay as they are; rows that do not fit a block size fall back to a smaller block type).\n"
      "The file is byte-identical to what llama-quantize writes for the same input and TYPE.\n"
      "\n"
      "options:\n"
      "  -t, --threads N          worker threads (default: all cores)\n"
      "  --pure                   give every quantizable tensor TYPE's base type (no mix rules)\n"
      "  --leave-output-tensor    keep output.weight as it is\n"
      "  --allow-requantize       accept already-quantized inputs (dequantized first; lossy)\n"
      "  --dry-run                print the per-tensor plan and sizes, write nothing\n"
      "  --override-kv KEY=TYPE:VALUE\n"
      "                           set a metadata key in OUT (TYPE int, float, bool or str; as\n"
      "                           llama-quantize: repeatable, int written as u32)\n"
      "  --llama-copy             COPY as llama-quantize does it (metadata and tensor order\n"
      "                           re-laid out); plain COPY re-emits IN byte for byte\n"
      "  -h, --help               this help\n"
      "\n"
      "TYPE (case-insensitive):\n");
  for (const QuantizeTarget& t : quantize_targets()) fmt::print("  {:<8} {}\n", t.name, t.description);
}

double mib(std::uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

std::string shape_label(const TensorPlan& p) {
  std::string s = "[";
  for (std::uint32_t d = 0; d < p.n_dims; ++d) s += fmt::format("{}{}", d ? ", " : "", p.ne[d]);
  return s + "]";
}

std::string tensor_line(const TensorPlan& p, std::size_t index, std::size_t count) {
  const auto src = fucina::gguf::to_string(p.src_type);
  if (!p.converts())
    return fmt::format("[{:>4}/{:>4}] {:<36} {:<26} {:>7}  {:8.3f} MiB", index + 1, count, p.name, shape_label(p), src,
                       mib(p.src_bytes));
  return fmt::format("[{:>4}/{:>4}] {:<36} {:<26} {:>7} -> {:<7}{}  {:8.3f} MiB -> {:8.3f} MiB", index + 1, count, p.name,
                     shape_label(p), src, fucina::gguf::to_string(p.dst_type), p.fallback ? " (fallback)" : "",
                     mib(p.src_bytes), mib(p.dst_bytes));
}

// A one-line bar redrawn in place on a terminal; a line per tensor otherwise.
class Progress {
 public:
  Progress(bool tty, std::string banner) : tty_(tty), banner_(std::move(banner)) {}

  void operator()(const QuantizeProgress& pr) {
    // Printed once the input parsed and the plan was made, so errors stay one line.
    if (!banner_.empty()) {
      fmt::print(stderr, "{}\n", banner_);
      banner_.clear();
    }
    if (!tty_) {
      if (pr.done) fmt::print(stderr, "{}\n", tensor_line(*pr.tensor, pr.index, pr.count));
      return;
    }
    const auto now = Clock::now();
    const bool last = pr.done && pr.index + 1 == pr.count;
    if (!last && now - drawn_ < std::chrono::milliseconds(100)) return;
    drawn_ = now;
    double done = static_cast<double>(pr.bytes_in_done);
    if (!pr.done && pr.rows_total > 0)
      done += static_cast<double>(pr.tensor->src_bytes) * static_cast<double>(pr.rows_done) /
              static_cast<double>(pr.rows_total);
    const double frac = pr.bytes_in_total ? done / static_cast<double>(pr.bytes_in_total) : 1.0;
    constexpr int width = 30;
    const int fill = static_cast<int>(frac * width + 0.5);
    std::string bar(static_cast<std::size_t>(fill), '#');
    bar.resize(width, '.');
    std::string name(pr.tensor->name.substr(0, 36));
    fmt::print(stderr, "\r\x1b[2K[{}] {:3.0f}% {:>4}/{:<4} {} -> {}", bar, frac * 100.0, pr.index + 1, pr.count, name,
               fucina::gguf::to_string(pr.tensor->dst_type));
    if (last) fmt::print(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  bool tty_;
  std::string banner_;
  Clock::time_point drawn_{};
};

int quantize_main(std::span<char* const> args) {
  QuantizeOptions opt;
  bool dry_run = false;
  bool llama_copy = false;  // COPY as llama-quantize does it (re-laid out), not verbatim
  std::vector<std::string> pos;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "-h" || a == "--help") {
      print_usage();
      return 0;
    }
    if (a == "-t" || a == "--threads") {
      if (i + 1 >= args.size()) throw fucina::cli::UsageError{fmt::format("{} needs a value", a)};
      opt.n_threads = fucina::cli::parse_threads(a, args[++i]);
    } else if (a == "--pure") {
      opt.pure = true;
    } else if (a == "--leave-output-tensor") {
      opt.leave_output = true;
    } else if (a == "--allow-requantize") {
      opt.allow_requantize = true;
    } else if (a == "--dry-run") {
      dry_run = true;
    } else if (a == "--llama-copy") {
      llama_copy = true;
    } else if (a == "--override-kv") {
      if (i + 1 >= args.size()) throw fucina::cli::UsageError{fmt::format("{} needs a value", a)};
      try {
        opt.kv_overrides.push_back(fucina::quant::parse_kv_override(args[++i]));
      } catch (const fucina::Error& e) {
        throw fucina::cli::UsageError{e.what()};
      }
    } else if (a.size() > 1 && a.starts_with("-")) {
      throw fucina::cli::UsageError{fmt::format("unknown option '{}' (see --help)", a)};
    } else {
      pos.emplace_back(a);
    }
  }
  if (pos.size() != 3 && !(dry_run && pos.size() == 2))
    throw fucina::cli::UsageError{"expected IN.gguf OUT.gguf TYPE (see --help)"};
  const std::string& type_name = pos.back();
  const auto target = find_quantize_target(type_name);
  if (!target) throw fucina::cli::UsageError{fmt::format("unknown TYPE '{}' (see --help for the list)", type_name)};
  opt.ftype = target->ftype;
  opt.copy_only = target->copy_only;

  if (dry_run) {
    const auto r = fucina::gguf::Reader::open(pos[0]);
    const ModelPlan plan = plan_quantization(r, opt);
    std::uint64_t in = 0, out = 0;
    for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
      fmt::print("{}\n", tensor_line(plan.tensors[i], i, plan.tensors.size()));
      in += plan.tensors[i].src_bytes;
      out += plan.tensors[i].dst_bytes;
    }
    fmt::print("{:.2f} MiB -> {:.2f} MiB, {} fallback(s), general.file_type = {}\n", mib(in), mib(out), plan.n_fallback,
               plan.file_type);
    return 0;
  }

  // Before any work: OUT must be absent or a regular file other than IN (for every TYPE).
  fucina::check_output_path(pos[1], {pos[0]});
  if (opt.copy_only && !llama_copy && opt.kv_overrides.empty()) {  // COPY: the input, byte for byte
    const auto r = fucina::gguf::Reader::open(pos[0]);
    fucina::gguf::Writer::from_reader(r).write_file(pos[1]);
    fmt::print(stderr, "copied {} to {} unchanged ({:.2f} MiB)\n", pos[0], pos[1], mib(r.bytes().size()));
    return 0;
  }

  const int threads = opt.n_threads > 0 ? opt.n_threads : fucina::ThreadPool::hardware_threads();
  Progress progress(isatty(STDERR_FILENO) != 0,
                    fmt::format("quantizing {} to {} as {} with {} thread(s)", pos[0], pos[1], target->name, threads));
  const auto t0 = Clock::now();
  const QuantizeStats s = quantize_model(pos[0], pos[1], opt, std::ref(progress));
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double n = static_cast<double>(std::max<std::uint64_t>(s.n_elements, 1));
  fmt::print(stderr, "model size {:.2f} MiB ({:.2f} bpw) -> {:.2f} MiB ({:.2f} bpw), {} of {} tensors converted", mib(s.bytes_in),
             static_cast<double>(s.bytes_in) * 8.0 / n, mib(s.bytes_out), static_cast<double>(s.bytes_out) * 8.0 / n,
             s.n_converted, s.n_tensors);
  if (s.n_fallback > 0) fmt::print(stderr, ", {} needed a fallback type", s.n_fallback);
  fmt::print(stderr, ", {:.2f} s\n", secs);
  return 0;
}

const fucina::cli::Command reg{"quantize", "convert a GGUF model's tensors (Q8_0, Q4_K_M, ...) like llama-quantize",
                               quantize_main};

}  // namespace
