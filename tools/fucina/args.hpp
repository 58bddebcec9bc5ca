#pragma once
// Strict command-line value parsing shared by the subcommands: a value must be a whole
// number (or a finite float) with nothing left over, else a UsageError naming the flag.
#include <fmt/core.h>

#include <charconv>
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "command.hpp"
#include "fucina/core/thread_pool.hpp"
#include "fucina/generate/draft_length.hpp"
#include "fucina/model/kv_cache.hpp"
#include "fucina/model/weights.hpp"

namespace fucina::cli {

template <class T>
T parse_num(std::string_view flag, const std::string& s) {
  T v{};
  const char* end = s.data() + s.size();
  std::from_chars_result r;
  if constexpr (std::is_floating_point_v<T>) {
    try {
      std::size_t used = 0;
      v = static_cast<T>(std::stod(s, &used));
      r.ptr = s.data() + used;
      r.ec = std::errc{};
    } catch (...) {
      r.ec = std::errc::invalid_argument;
    }
  } else {
    r = std::from_chars(s.data(), end, v);
  }
  bool finite = true;
  if constexpr (std::is_floating_point_v<T>) finite = std::isfinite(v);
  if (r.ec != std::errc{} || r.ptr != end || s.empty() || !finite)
    throw UsageError{fmt::format("{}: '{}' is not a valid finite number", flag, s)};
  return v;
}

// The value after flag args[i], advancing i past it; a UsageError when the flag ends the line.
inline std::string flag_value(std::span<char* const> args, std::size_t& i) {
  if (i + 1 >= args.size()) throw UsageError{fmt::format("{} needs a value", args[i])};
  return args[++i];
}

// True, after printing `usage` to stdout, when `a` asks for help (-h, --help).
inline bool help_requested(std::string_view a, std::string_view usage) {
  if (a != "-h" && a != "--help") return false;
  fmt::print("{}", usage);
  return true;
}

// "1,2,3" -> {1, 2, 3}, each element parsed strictly.
template <class T>
std::vector<T> parse_list(std::string_view flag, const std::string& s) {
  std::vector<T> out;
  std::size_t b = 0;
  while (true) {
    const std::size_t e = s.find(',', b);
    out.push_back(parse_num<T>(flag, s.substr(b, e == std::string::npos ? std::string::npos : e - b)));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

// A worker thread count (-t): at least 1. Above 4x the cores it is capped, with a warning:
// more threads only slow a run down and can exhaust the process's thread and memory limits.
inline int check_threads(std::string_view flag, int n) {
  if (n < 1) throw UsageError{fmt::format("{} must be at least 1, got {}", flag, n)};
  const int cores = ThreadPool::hardware_threads(), cap = 4 * cores;
  if (n <= cap) return n;
  fmt::print(stderr, "fucina: warning: {} {} is more than 4x the {} cores; using {}\n", flag, n, cores, cap);
  return cap;
}
inline int parse_threads(std::string_view flag, const std::string& s) { return check_threads(flag, parse_num<int>(flag, s)); }

// The model-loading flags run, bench and serve share (args[i]; a value advances i); false
// when args[i] is not one of them. --moe-cache implies --moe-stream.
inline bool parse_load_flag(std::span<char* const> args, std::size_t& i, model::LoadOptions& o) {
  const std::string_view a = args[i];
  if (a == "--fast-prefill") o.fast_prefill = true;
  else if (a == "--no-repack") o.repack = false;
  else if (a == "--moe-stream") o.moe_stream = true;
  else if (a == "--moe-cache") {
    constexpr std::int64_t max_mib = std::int64_t{1} << 24;  // 16 TiB: no overflow in bytes
    const auto mib = parse_num<std::int64_t>(a, flag_value(args, i));
    if (mib < 1 || mib > max_mib)
      throw UsageError{fmt::format("--moe-cache must be 1..{} MiB, got {}", max_mib, mib)};
    o.moe_stream = true;
    o.moe_cache_bytes = static_cast<std::uint64_t>(mib) << 20;
  } else {
    return false;
  }
  return true;
}

// Their help lines (each command's usage ends with them).
inline constexpr std::string_view moe_stream_help =
    "  --moe-stream             MoE models: read the routed experts from the file on demand\n"
    "                           into a bounded cache instead of mapping them (same logits)\n"
    "  --moe-cache MB           the expert cache for --moe-stream (implies it; default 4096)\n";

// The speculative decoding flags run and serve share (Note [Speculative decoding]):
// --spec lookup|off, --draft-max N, --draft-min N (args[i]; a value advances i); false when
// args[i] is not one of them. check_spec_flags() once all are read.
inline bool parse_spec_flag(std::span<char* const> args, std::size_t& i, generate::SpeculativeOptions& o) {
  const std::string_view a = args[i];
  if (a == "--spec") {
    const std::string mode = flag_value(args, i);
    if (mode != "lookup" && mode != "off") throw UsageError{fmt::format("--spec must be lookup or off, not '{}'", mode)};
    o.enabled = mode == "lookup";
  } else if (a == "--draft-max") {
    o.draft_max = parse_num<std::int32_t>(a, flag_value(args, i));
  } else if (a == "--draft-min") {
    o.draft_min = parse_num<std::int32_t>(a, flag_value(args, i));
  } else {
    return false;
  }
  return true;
}
inline void check_spec_flags(const generate::SpeculativeOptions& o) {
  if (o.draft_min < 1) throw UsageError{fmt::format("--draft-min must be at least 1, got {}", o.draft_min)};
  if (o.draft_max < o.draft_min)
    throw UsageError{fmt::format("--draft-max {} must be at least --draft-min {}", o.draft_max, o.draft_min)};
}
inline constexpr std::string_view spec_help =
    "  --spec lookup|off        speculative decoding with drafts looked up in the context\n"
    "                           (default lookup; lossless: the output is plain decoding's;\n"
    "                           drafting pauses while the drafts miss)\n"
    "  --draft-max N            drafted tokens per verification at most (default 16)\n"
    "  --draft-min N            verify only drafts of at least N tokens (default 1)\n";

// The KV cache type: --kv-type T, or llama.cpp's -ctk T / -ctv T (K and V share one type
// here, so they must agree); false when `a` is not one of these flags.
struct KvFlags {
  model::KvType type = model::KvType::f16;
  bool k_set = false, v_set = false;
};
inline bool parse_kv_flag(std::string_view a, const std::function<std::string()>& value, KvFlags& kv) {
  const bool k = a == "-ctk" || a == "--cache-type-k", v = a == "-ctv" || a == "--cache-type-v";
  if (!k && !v && a != "--kv-type") return false;
  const std::string name = value();
  const auto t = model::kv_type_from_name(name);
  if (!t) throw UsageError{fmt::format("{} must be f16, f32 or q8_0, not '{}'", a, name)};
  if ((k && kv.v_set && *t != kv.type) || (v && kv.k_set && *t != kv.type))
    throw UsageError{fmt::format("K and V cache types must match (-ctk and -ctv), got {} and {}",
                                 model::kv_type_name(kv.type), name)};
  kv.type = *t;
  kv.k_set = kv.k_set || k;
  kv.v_set = kv.v_set || v;
  return true;
}

}  // namespace fucina::cli
