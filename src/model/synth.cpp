#include "fucina/model/synth.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "fucina/core/atomic_file.hpp"
#include "fucina/core/error.hpp"
#include "fucina/core/fast_math.hpp"
#include "fucina/core/half.hpp"
#include "fucina/core/rng.hpp"
#include "fucina/core/thread_pool.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/gguf/writer.hpp"
#include "fucina/quant/k_quants.hpp"

namespace fucina::model {

namespace {

// Limits that keep every size representable and within what llama.cpp accepts
// (LLAMA_MAX_LAYERS 512, LLAMA_MAX_EXPERTS 1024).
constexpr std::int64_t max_width = std::int64_t{1} << 20;
constexpr std::int64_t max_layers = 512;
constexpr std::int64_t max_heads = 4096;
constexpr std::int64_t max_experts = 1024;
constexpr std::int64_t max_ctx = std::int64_t{1} << 30;
constexpr double max_file_bytes = 0x1p46;  // 64 TiB

void check_range(std::string_view what, std::int64_t v, std::int64_t lo, std::int64_t hi) {
  FUCINA_CHECK(v >= lo && v <= hi, InvalidArgument, "[synth] {} must be in {}..{}, got {}", what, lo, hi, v);
}

void check_positive_finite(std::string_view what, float v) {
  FUCINA_CHECK(std::isfinite(v) && v > 0.f, InvalidArgument, "[synth] {} must be a positive finite number, got {}", what,
               v);
}

bool is_moe(const SynthSpec& s) { return s.arch == "qwen3moe"; }

// What one tensor holds: shape (ggml order), type and how its values are drawn.
struct Plan {
  std::string name;
  gguf::GgmlType type = gguf::GgmlType::F32;
  std::array<std::int64_t, 3> ne{1, 1, 1};
  std::uint32_t n_dims = 1;
  bool norm = false;  // 1 + 0.1 N(0,1) instead of std N(0,1)
  float std = 0.f;

  std::int64_t n_elements() const { return ne[0] * ne[1] * ne[2]; }
};

gguf::GgmlType matrix_type(DType d) {
  switch (d) {
    case DType::f16: return gguf::GgmlType::F16;
    case DType::bf16: return gguf::GgmlType::BF16;
    default: return gguf::GgmlType::F32;
  }
}

std::uint32_t file_type(DType d) {  // llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_BF16
  switch (d) {
    case DType::f16: return 1;
    case DType::bf16: return 32;
    default: return 0;
  }
}

// What a tensor is generated in: single elements of f32/f16/bf16, or whole Q4_K blocks.
struct Unit {
  std::int64_t elements;
  std::size_t bytes;
};
Unit unit_of(gguf::GgmlType t) {
  if (t == gguf::GgmlType::Q4_K) return {quant::kQK_K, sizeof(quant::BlockQ4_K)};
  return {1, t == gguf::GgmlType::F32 ? 4u : 2u};
}

// synth_gguf.py's tensor list, in its order.
std::vector<Plan> plan_tensors(const SynthSpec& s, std::int64_t n_vocab) {
  const std::int64_t hd = synth_head_dim(s), h = s.n_embd;
  const float std = s.std > 0.f ? s.std : static_cast<float>(1.0 / std::sqrt(static_cast<double>(h)));
  const gguf::GgmlType mt = matrix_type(s.dtype);
  std::vector<Plan> p;
  auto mat = [&](std::string name, std::int64_t rows, std::int64_t cols, float sd, gguf::GgmlType t) {
    p.push_back({std::move(name), t, {cols, rows, 1}, 2, false, sd});
  };
  auto norm = [&](std::string name, std::int64_t n) { p.push_back({std::move(name), gguf::GgmlType::F32, {n, 1, 1}, 1, true, 0.f}); };
  auto experts = [&](std::string name, std::int64_t rows, std::int64_t cols) {
    p.push_back({std::move(name), s.q4_k_experts ? gguf::GgmlType::Q4_K : mt, {cols, rows, s.n_expert}, 3, false, std});
  };
  mat("token_embd.weight", n_vocab, h, s.tied ? 0.1f : 1.0f, mt);
  for (std::int64_t l = 0; l < s.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    norm(b + "attn_norm.weight", h);
    mat(b + "attn_q.weight", s.n_head * hd, h, std, mt);
    mat(b + "attn_k.weight", s.n_head_kv * hd, h, std, mt);
    mat(b + "attn_v.weight", s.n_head_kv * hd, h, std, mt);
    mat(b + "attn_output.weight", h, s.n_head * hd, std, mt);
    if (s.arch != "llama") {
      norm(b + "attn_q_norm.weight", hd);
      norm(b + "attn_k_norm.weight", hd);
    }
    norm(b + "ffn_norm.weight", h);
    if (is_moe(s)) {
      mat(b + "ffn_gate_inp.weight", s.n_expert, h, 0.5f, gguf::GgmlType::F32);
      experts(b + "ffn_gate_exps.weight", s.n_ff_exp, h);
      experts(b + "ffn_up_exps.weight", s.n_ff_exp, h);
      experts(b + "ffn_down_exps.weight", h, s.n_ff_exp);
    } else {
      mat(b + "ffn_gate.weight", s.n_ff, h, std, mt);
      mat(b + "ffn_up.weight", s.n_ff, h, std, mt);
      mat(b + "ffn_down.weight", h, s.n_ff, std, mt);
    }
  }
  norm("output_norm.weight", h);
  if (!s.tied) mat("output.weight", n_vocab, h, std, mt);
  return p;
}

// Note [Built-in vocab] (synth.hpp). Token types: 1 normal, 2 unknown, 3 control, 6 byte.
void set_builtin_vocab(gguf::Writer& w) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0.f, 0.f, 0.f};
  std::vector<std::int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    scores.push_back(0.f);
    types.push_back(6);
  }
  for (int c = 0x20; c < 0x7f; ++c) {
    tokens.push_back(c == ' ' ? std::string("\xe2\x96\x81") : std::string(1, static_cast<char>(c)));
    scores.push_back(-static_cast<float>(c - 0x20));
    types.push_back(1);
  }
  FUCINA_ASSERT(static_cast<std::int64_t>(tokens.size()) == builtin_vocab_size);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string("tokenizer.ggml.pre", "default");
  w.set_string_array("tokenizer.ggml.tokens", std::span<const std::string>(tokens));
  w.set_array("tokenizer.ggml.scores", std::span<const float>(scores));
  w.set_array("tokenizer.ggml.token_type", std::span<const std::int32_t>(types));
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
}

// The vocabulary size of a GGUF whose tokenizer.* keys will be copied.
std::int64_t vocab_size(const gguf::Reader& src, const std::filesystem::path& path) {
  FUCINA_CHECK(src.contains("tokenizer.ggml.tokens"), InvalidFile, "[synth] '{}' has no tokenizer.ggml.tokens",
               path.string());
  const gguf::ArrayView tokens = src.get_array_view("tokenizer.ggml.tokens");
  FUCINA_CHECK(tokens.element_type() == gguf::ValueType::String && tokens.size() > 0, InvalidFile,
               "[synth] '{}' has no tokens in tokenizer.ggml.tokens", path.string());
  return static_cast<std::int64_t>(tokens.size());
}

// sqrt(w) for w in [0, 34] as w * rsqrt(w), the reciprocal root refined by Newton from the
// bit-trick estimate: plain arithmetic, so the loop vectorizes (std::sqrt keeps an errno
// branch) and every platform gets the same bits. Relative error ~1e-7.
inline float sqrt_newton(float w) {
  float y = std::bit_cast<float>(0x5f3759dfu - (std::bit_cast<std::uint32_t>(w) >> 1));
  for (int it = 0; it < 3; ++it) y = y * (1.5f - 0.5f * w * y * y);
  return w * y;
}

// Pair k of the normal stream: Box-Muller on the two 32-bit halves of rng::bits(seed, k),
// the angle's quadrant taken exactly from its top bits.
inline void normal_pair(std::uint64_t key, std::uint64_t k, float& c, float& s) {
  const std::uint64_t r = rng::splitmix64(key ^ (k * 0xd1b54a32d192ed03ull));  // == rng::bits(seed, k)
  const float u1 = (static_cast<float>(static_cast<std::uint32_t>(r >> 40)) + 1.0f) * 0x1p-24f;  // (0, 1]
  const float rad = sqrt_newton(-2.0f * fucina::fast_log(u1));
  const float t = static_cast<float>(static_cast<std::uint32_t>(r & 0xffffffu)) * 0x1p-22f;  // angle / (pi/2), [0, 4)
  const float n = static_cast<float>(static_cast<std::int32_t>(t + 0.5f));                  // nearest quadrant
  const float x = (t - n) * 1.57079632679f;                                                  // [-pi/4, pi/4]
  const float z = x * x;
  float sn = -1.9515295891e-4f * z + 8.3321608736e-3f;
  sn = (sn * z - 1.6666654611e-1f) * z * x + x;
  float cs = 2.443315711809948e-5f * z - 1.388731625493765e-3f;
  cs = (cs * z + 4.166664568298827e-2f) * z * z - 0.5f * z + 1.0f;
  // Quadrant q: (cos, sin) of x + q pi/2 is (cs, sn), (-sn, cs), (-cs, -sn), (sn, -cs).
  const std::uint32_t q = static_cast<std::uint32_t>(static_cast<std::int32_t>(n)) & 3u;
  const float bc = (q & 1u) ? sn : cs;
  const float bs = (q & 1u) ? cs : sn;
  c = rad * std::bit_cast<float>(std::bit_cast<std::uint32_t>(bc) ^ (((q + 1u) & 2u) << 30));
  s = rad * std::bit_cast<float>(std::bit_cast<std::uint32_t>(bs) ^ ((q & 2u) << 30));
}

// Q4_K blocks [begin, end) of tensor `p` (stream `seed`): uniform random 4-bit values, every
// sub-block scale and min 32, d and dmin set so the values have mean 0 and std p.std.
void fill_q4_k(const Plan& p, std::uint64_t seed, std::int64_t begin, std::int64_t end, std::byte* out) {
  constexpr int sc = 32;
  const float d = p.std / (sc * 4.6098f);  // a uniform 0..15 has std sqrt(255/12)
  quant::BlockQ4_K blk{};
  blk.d = float_to_half(d);
  blk.dmin = float_to_half(7.5f * d);
  // get_scale_min_k4's packing of scale = min = 32 for all 8 sub-blocks.
  for (int j = 0; j < 8; ++j) blk.scales[j] = 0xA0;
  for (int j = 8; j < 12; ++j) blk.scales[j] = 0;
  for (std::int64_t b = begin; b < end; ++b) {
    for (int i = 0; i < 16; ++i) {
      const std::uint64_t r = rng::bits(seed, static_cast<std::uint64_t>(b) * 16 + static_cast<std::uint64_t>(i));
      std::memcpy(blk.qs + 8 * i, &r, 8);
    }
    std::memcpy(out + static_cast<std::size_t>(b - begin) * sizeof blk, &blk, sizeof blk);
  }
}

// Units [begin, end) of tensor `p` (normal stream `seed`) into `out` (unit begin at out[0]).
void fill(const Plan& p, std::uint64_t seed, std::int64_t begin, std::int64_t end, std::byte* out) {
  if (p.type == gguf::GgmlType::Q4_K) return fill_q4_k(p, seed, begin, end, out);
  constexpr std::int64_t block = 1024;
  float z[block];
  const std::size_t eb = unit_of(p.type).bytes;
  for (std::int64_t b0 = begin; b0 < end; b0 += block) {
    const std::int64_t b1 = std::min(end, b0 + block);
    synth_normals(seed, static_cast<std::uint64_t>(b0), std::span<float>(z, static_cast<std::size_t>(b1 - b0)));
    const std::int64_t n = b1 - b0;
    const float a = p.norm ? 0.1f : p.std, c = p.norm ? 1.0f : 0.0f;
    for (std::int64_t i = 0; i < n; ++i) z[i] = c + a * z[i];
    std::byte* dst = out + static_cast<std::size_t>(b0 - begin) * eb;
    if (p.type == gguf::GgmlType::F32) {
      std::memcpy(dst, z, static_cast<std::size_t>(n) * 4);
    } else {
      std::uint16_t h[block];
      if (p.type == gguf::GgmlType::F16)
        for (std::int64_t i = 0; i < n; ++i) h[i] = float_to_half(z[i]);
      else
        for (std::int64_t i = 0; i < n; ++i) h[i] = float_to_bf16(z[i]);
      std::memcpy(dst, h, static_cast<std::size_t>(n) * 2);
    }
  }
}

// Generates each chunk on every thread, then hands it to the (sequential) file writer.
void stream_tensors(const gguf::Writer& layout, const std::vector<Plan>& plans, std::uint64_t seed,
                    const std::filesystem::path& out, ThreadPool& pool) {
  constexpr std::int64_t chunk = std::int64_t{1} << 22;
  std::vector<std::byte> buf;
  // Written next to `out` and renamed over it once complete: a failure leaves `out` as it was.
  gguf::StreamWriter sw(layout, out);
  for (std::size_t t = 0; t < plans.size(); ++t) {
    const Plan& p = plans[t];
    const std::uint64_t stream = rng::bits(seed, t);
    const Unit u = unit_of(p.type);
    const std::size_t eb = u.bytes;
    const std::int64_t n = p.n_elements() / u.elements;
    for (std::int64_t c0 = 0; c0 < n; c0 += chunk) {
      const std::int64_t c1 = std::min(n, c0 + chunk);
      buf.resize(static_cast<std::size_t>(c1 - c0) * eb);
      pool.parallel_range(c1 - c0, 4096, [&](std::int64_t b, std::int64_t e) {
        fill(p, stream, c0 + b, c0 + e, buf.data() + static_cast<std::size_t>(b) * eb);
      });
      sw.write(gguf::Bytes(buf.data(), buf.size()));
    }
  }
  sw.finish();
}

}  // namespace

void synth_normals(std::uint64_t seed, std::uint64_t first, std::span<float> out) {
  const std::uint64_t key = rng::splitmix64(seed);
  std::size_t i = 0;
  float c, s;
  if (first % 2 == 1 && i < out.size()) {  // odd start: the sine half of a pair
    normal_pair(key, first / 2, c, s);
    out[i++] = s;
  }
  const std::uint64_t k0 = (first + i) / 2;
  const std::size_t pairs = (out.size() - i) / 2;
  float* o = out.data() + i;
  for (std::size_t j = 0; j < pairs; ++j) {
    normal_pair(key, k0 + j, c, s);
    o[2 * j] = c;
    o[2 * j + 1] = s;
  }
  i += 2 * pairs;
  if (i < out.size()) {
    normal_pair(key, k0 + pairs, c, s);
    out[i] = c;
  }
}

std::int64_t synth_head_dim(const SynthSpec& s) { return s.head_dim > 0 ? s.head_dim : (s.n_head > 0 ? s.n_embd / s.n_head : 0); }

void check_synth_spec(const SynthSpec& s) {
  FUCINA_CHECK(s.arch == "llama" || s.arch == "qwen3" || s.arch == "qwen3moe", InvalidArgument,
               "[synth] unknown architecture '{}' (llama, qwen3 or qwen3moe)", s.arch);
  check_range("hidden size (--hidden)", s.n_embd, 1, max_width);
  check_range("layer count (--layers)", s.n_layer, 1, max_layers);
  check_range("head count (--heads)", s.n_head, 1, max_heads);
  check_range("kv head count (--kv-heads)", s.n_head_kv, 1, s.n_head);
  FUCINA_CHECK(s.n_head % s.n_head_kv == 0, InvalidArgument, "[synth] kv heads (--kv-heads) {} do not divide heads (--heads) {}", s.n_head_kv,
               s.n_head);
  FUCINA_CHECK(s.head_dim >= 0, InvalidArgument, "[synth] head dim (--head-dim) must be positive, got {}", s.head_dim);
  if (s.head_dim == 0)
    FUCINA_CHECK(s.n_embd % s.n_head == 0, InvalidArgument,
                 "[synth] hidden size {} is not a multiple of the head count {} (or give --head-dim)", s.n_embd, s.n_head);
  const std::int64_t hd = synth_head_dim(s);
  check_range("head dim (--head-dim)", hd, 2, std::int64_t{1} << 16);
  FUCINA_CHECK(hd % 2 == 0, InvalidArgument, "[synth] head dim must be even (RoPE rotates pairs), got {}", hd);
  if (is_moe(s)) {
    check_range("expert count (--experts)", s.n_expert, 1, max_experts);
    check_range("experts used (--experts-used)", s.n_expert_used, 1, s.n_expert);
    check_range("expert FFN size (--expert-ffn)", s.n_ff_exp, 1, max_width);
  }
  FUCINA_CHECK(!s.q4_k_experts || (is_moe(s) && s.n_embd % quant::kQK_K == 0 && s.n_ff_exp % quant::kQK_K == 0),
               InvalidArgument, "[synth] Q4_K experts (--q4k-experts) need qwen3moe with --hidden and --expert-ffn multiples of {}",
               quant::kQK_K);
  check_range("FFN size (--ffn)", s.n_ff, 1, max_width);
  check_range("context length (--ctx)", s.n_ctx, 1, max_ctx);
  check_positive_finite("RoPE base (--rope-base)", s.rope_base);
  check_positive_finite("RMS norm epsilon (--eps)", s.rms_eps);
  FUCINA_CHECK(std::isfinite(s.std) && s.std >= 0.f, InvalidArgument, "[synth] std (--std) must be >= 0 (0: 1/sqrt(hidden)), got {}",
               s.std);
  FUCINA_CHECK(s.dtype == DType::f32 || s.dtype == DType::f16 || s.dtype == DType::bf16, InvalidArgument,
               "[synth] matrix dtype must be f32, f16 or bf16, got {}", dtype_name(s.dtype));
}

void write_synthetic_model(const std::filesystem::path& out, const SynthSpec& spec) {
  ThreadPool pool;
  write_synthetic_model(out, spec, pool);
}

void write_synthetic_model(const std::filesystem::path& out, const SynthSpec& s, ThreadPool& pool) {
  check_synth_spec(s);
  check_output_path(out);
  const std::int64_t hd = synth_head_dim(s);
  const std::string& a = s.arch;
  auto key = [&](std::string_view k) { return fmt::format("{}.{}", a, k); };
  auto u32 = [](std::int64_t v) { return static_cast<std::uint32_t>(v); };

  // Metadata in synth_gguf.py's order.
  gguf::Writer w;
  w.set_string("general.architecture", a);
  w.set_string("general.name", fmt::format("synthetic-{}-h{}-l{}-s{}", a, s.n_embd, s.n_layer, s.seed));
  w.set_u32(key("context_length"), u32(s.n_ctx));
  w.set_u32(key("embedding_length"), u32(s.n_embd));
  w.set_u32(key("block_count"), u32(s.n_layer));
  w.set_u32(key("feed_forward_length"), u32(s.n_ff));
  w.set_u32(key("attention.head_count"), u32(s.n_head));
  w.set_u32(key("attention.head_count_kv"), u32(s.n_head_kv));
  w.set_u32(key("attention.key_length"), u32(hd));
  w.set_u32(key("attention.value_length"), u32(hd));
  w.set_f32(key("rope.freq_base"), s.rope_base);
  w.set_f32(key("attention.layer_norm_rms_epsilon"), s.rms_eps);
  w.set_u32("general.file_type", file_type(s.dtype));
  std::optional<gguf::Reader> src;
  if (!s.vocab_from.empty()) src = gguf::Reader::open(s.vocab_from);
  const std::int64_t n_vocab = src ? vocab_size(*src, s.vocab_from) : builtin_vocab_size;
  if (a == "llama") {
    w.set_u32(key("rope.dimension_count"), u32(hd));
    w.set_u32(key("vocab_size"), u32(n_vocab));
  }
  if (is_moe(s)) {
    w.set_u32(key("expert_count"), u32(s.n_expert));
    w.set_u32(key("expert_used_count"), u32(s.n_expert_used));
    w.set_u32(key("expert_feed_forward_length"), u32(s.n_ff_exp));
  }
  if (src) {
    for (const gguf::KeyValue& kv : src->metadata())
      if (kv.key.starts_with("tokenizer.")) w.set(kv.key, kv.value);
  } else {
    set_builtin_vocab(w);
  }
  src.reset();  // the keys are copied; `out` may even be the vocab file

  const std::vector<Plan> plans = plan_tensors(s, n_vocab);
  double total = 0;
  for (const Plan& p : plans)
    total += static_cast<double>(p.n_elements() / unit_of(p.type).elements) * static_cast<double>(unit_of(p.type).bytes);
  FUCINA_CHECK(total <= max_file_bytes, InvalidArgument, "[synth] the model would take {:.3g} bytes (limit {:.3g})", total,
               max_file_bytes);
  for (const Plan& p : plans) w.add_tensor(p.name, p.type, std::span<const std::int64_t>(p.ne.data(), p.n_dims));

  stream_tensors(w, plans, s.seed, out, pool);
}

}  // namespace fucina::model
