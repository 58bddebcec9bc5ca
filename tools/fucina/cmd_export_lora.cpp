// fucina export-lora: merge LoRA adapters into a base model (llama-export-lora's job).
#include <fmt/core.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "fucina/gguf/format.hpp"
#include "fucina/model/lora_merge.hpp"

namespace {

using fucina::cli::UsageError;
namespace fm = fucina::model;

constexpr std::string_view usage =
    "usage: fucina export-lora BASE.gguf --lora ADAPTER.gguf [--lora-scaled ADAPTER.gguf SCALE ...]\n"
    "                          -o MERGED.gguf [--type TYPE] [-t N]\n"
    "\n"
    "Merges LoRA adapters (llama.cpp's GGUF adapter format) into BASE: every adapted matrix\n"
    "becomes W + scale * B A, with scale = SCALE * alpha / rank (SCALE alone when the adapter\n"
    "has no alpha), computed in f32 with llama-export-lora's arithmetic. A merged tensor keeps\n"
    "its base type: a quantized one is dequantized, merged and re-encoded (llama-export-lora\n"
    "writes f16 instead); the other tensors are copied byte for byte.\n"
    "\n"
    "options:\n"
    "  -m, --model BASE.gguf      the base model (or the first positional argument)\n"
    "  --lora FILE                an adapter, scale 1 (repeatable)\n"
    "  --lora-scaled FILE SCALE   an adapter with a user scale (repeatable; llama.cpp's\n"
    "                             FILE:SCALE[,FILE:SCALE...] is accepted too)\n"
    "  -o, --output FILE          the merged model (required; never one of the inputs)\n"
    "  --type TYPE                then convert the whole model to TYPE as `fucina quantize\n"
    "                             TYPE --allow-requantize` does (F32, F16, BF16, Q8_0, Q4_0,\n"
    "                             Q4_K_M, ...: see fucina quantize --help); holds the merged\n"
    "                             model in memory\n"
    "  -t, --threads N            worker threads (default: all cores)\n"
    "  -h, --help                 this help\n";

bool is_number(const std::string& s) {
  try {
    fucina::cli::parse_num<float>("", s);
    return true;
  } catch (const UsageError&) {
    return false;
  }
}

struct AdapterArg {
  std::string path;
  float scale;
};

int export_lora_main(std::span<char* const> args) {
  std::string base, out;
  std::vector<AdapterArg> loras;
  fm::LoraMergeOptions opt;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const auto value = [&] { return fucina::cli::flag_value(args, i); };
    if (fucina::cli::help_requested(a, usage)) return 0;
    if (a == "-m" || a == "--model") {
      if (!base.empty()) throw UsageError{"the base model is given twice"};
      base = value();
    } else if (a == "--lora") {
      loras.push_back({value(), 1.0f});
    } else if (a == "--lora-scaled") {
      const std::string v = value();
      if (const auto colon = v.rfind(':'); colon != std::string::npos && is_number(v.substr(colon + 1))) {
        // llama.cpp's spelling: FILE:SCALE[,FILE:SCALE...]
        for (std::size_t b = 0; b < v.size();) {
          std::size_t e = v.find(',', b);
          if (e == std::string::npos) e = v.size();
          const std::string item = v.substr(b, e - b);
          const std::size_t c = item.rfind(':');
          if (c == std::string::npos) throw UsageError{fmt::format("--lora-scaled: '{}' is not FILE:SCALE", item)};
          loras.push_back({item.substr(0, c), fucina::cli::parse_num<float>(a, item.substr(c + 1))});
          b = e + 1;
        }
      } else {
        loras.push_back({v, fucina::cli::parse_num<float>(a, value())});
      }
    } else if (a == "-o" || a == "--output") {
      out = value();
    } else if (a == "--type") {
      const std::string t = value();
      opt.type = fucina::quant::find_quantize_target(t);
      if (!opt.type || opt.type->copy_only)
        throw UsageError{fmt::format("unknown --type '{}' (see fucina quantize --help for the list)", t)};
    } else if (a == "-t" || a == "--threads") {
      opt.n_threads = fucina::cli::parse_threads(a, value());
    } else if (a.size() > 1 && a[0] == '-') {
      throw UsageError{fmt::format("unknown option '{}' (see fucina export-lora --help)", a)};
    } else if (base.empty()) {
      base = std::string(a);
    } else {
      throw UsageError{fmt::format("unexpected argument '{}' (see fucina export-lora --help)", a)};
    }
  }
  if (base.empty()) throw UsageError{"no base model given (see fucina export-lora --help)"};
  if (loras.empty()) throw UsageError{"no adapter given: pass --lora ADAPTER.gguf"};
  if (out.empty()) throw UsageError{"no output given: pass -o MERGED.gguf"};

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::filesystem::path> paths;
  std::vector<fm::ScaledLora> adapters;
  for (const AdapterArg& l : loras) {
    paths.emplace_back(l.path);
    adapters.push_back({fm::read_lora(l.path), l.scale});
  }
  const auto stats = fm::export_lora(base, paths, adapters, out, opt);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print(stderr, "fucina export-lora: merged {} of {} tensors from {} adapter(s){} into {} ({:.2f} MiB) in {:.2f} s\n",
             stats.n_merged, stats.n_tensors, adapters.size(), opt.type ? fmt::format(", converted to {}", opt.type->name) : "",
             out, static_cast<double>(stats.bytes_out) / (1024.0 * 1024.0), secs);
  return 0;
}

const fucina::cli::Command reg("export-lora", "merge LoRA adapters into a model, like llama-export-lora", export_lora_main);

}  // namespace
