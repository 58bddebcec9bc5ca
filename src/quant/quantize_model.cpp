#include "fucina/quant/quantize_model.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <sys/mman.h>
#include <unistd.h>

#include "fucina/core/atomic_file.hpp"
#include "fucina/core/error.hpp"
#include "fucina/core/thread_pool.hpp"
#include "fucina/quant/traits.hpp"

namespace fucina::quant {

namespace {

using gguf::GgmlType;
using F = FileType;

constexpr std::uint32_t quantization_version = 2;  // ggml's GGML_QNT_VERSION
constexpr std::uint32_t ftype_guessed = 1024;       // llama.cpp's LLAMA_FTYPE_GUESSED
// Output bytes converted per slab; bounds memory for huge tensors (token_embd).
constexpr std::uint64_t slab_bytes = 64ull << 20;
// Elements per parallel task: big enough to amortize dispatch, small enough to balance.
constexpr std::int64_t task_elements = 32 * 1024;

// llama-quantize's names (its numeric spellings are not accepted here).
constexpr std::array<QuantizeTarget, 24> targets = {{
    {"Q4_0", F::MostlyQ4_0, false, "4.5 bpw, blocks of 32"},
    {"Q4_1", F::MostlyQ4_1, false, "5.0 bpw, blocks of 32 with a min"},
    {"Q5_0", F::MostlyQ5_0, false, "5.5 bpw, blocks of 32"},
    {"Q5_1", F::MostlyQ5_1, false, "6.0 bpw, blocks of 32 with a min"},
    {"TQ1_0", F::MostlyTQ1_0, false, "1.69 bpw ternary"},
    {"TQ2_0", F::MostlyTQ2_0, false, "2.06 bpw ternary"},
    {"Q2_K", F::MostlyQ2_K, false, "2.6 bpw K-quant mix"},
    {"Q3_K", F::MostlyQ3_K_M, false, "alias for Q3_K_M"},
    {"Q3_K_S", F::MostlyQ3_K_S, false, "3.4 bpw K-quant"},
    {"Q3_K_M", F::MostlyQ3_K_M, false, "3.9 bpw K-quant mix"},
    {"Q3_K_L", F::MostlyQ3_K_L, false, "4.3 bpw K-quant mix"},
    {"IQ4_NL", F::MostlyIQ4_NL, false, "4.5 bpw non-linear, blocks of 32"},
    {"Q4_K", F::MostlyQ4_K_M, false, "alias for Q4_K_M"},
    {"Q4_K_S", F::MostlyQ4_K_S, false, "4.6 bpw K-quant mix"},
    {"Q4_K_M", F::MostlyQ4_K_M, false, "4.9 bpw K-quant mix"},
    {"Q5_K", F::MostlyQ5_K_M, false, "alias for Q5_K_M"},
    {"Q5_K_S", F::MostlyQ5_K_S, false, "5.5 bpw K-quant mix"},
    {"Q5_K_M", F::MostlyQ5_K_M, false, "5.7 bpw K-quant mix"},
    {"Q6_K", F::MostlyQ6_K, false, "6.6 bpw K-quant"},
    {"Q8_0", F::MostlyQ8_0, false, "8.5 bpw, blocks of 32"},
    {"F16", F::MostlyF16, false, "16 bpw IEEE half"},
    {"BF16", F::MostlyBF16, false, "16 bpw bfloat16"},
    {"F32", F::AllF32, false, "32 bpw"},
    {"COPY", F::AllF32, true, "copy every tensor unchanged"},
}};

GgmlType default_type(F ftype) {
  switch (ftype) {
    case F::AllF32: return GgmlType::F32;
    case F::MostlyF16: return GgmlType::F16;
    case F::MostlyBF16: return GgmlType::BF16;
    case F::MostlyQ4_0: return GgmlType::Q4_0;
    case F::MostlyQ4_1: return GgmlType::Q4_1;
    case F::MostlyQ5_0: return GgmlType::Q5_0;
    case F::MostlyQ5_1: return GgmlType::Q5_1;
    case F::MostlyQ8_0: return GgmlType::Q8_0;
    case F::MostlyQ2_K: return GgmlType::Q2_K;
    case F::MostlyQ3_K_S:
    case F::MostlyQ3_K_M:
    case F::MostlyQ3_K_L: return GgmlType::Q3_K;
    case F::MostlyQ4_K_S:
    case F::MostlyQ4_K_M: return GgmlType::Q4_K;
    case F::MostlyQ5_K_S:
    case F::MostlyQ5_K_M: return GgmlType::Q5_K;
    case F::MostlyQ6_K: return GgmlType::Q6_K;
    case F::MostlyIQ4_NL: return GgmlType::IQ4_NL;
    case F::MostlyTQ1_0: return GgmlType::TQ1_0;
    case F::MostlyTQ2_0: return GgmlType::TQ2_0;
  }
  FUCINA_CHECK(false, InvalidArgument, "[quantize] unsupported file type {}", static_cast<std::uint32_t>(ftype));
  return GgmlType::F32;
}

// llama_model_loader's guess of a file's ftype from its most common tensor type.
std::uint32_t ftype_of_tensor_type(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::BF16: return 32;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q4_1: return 3;
    case GgmlType::Q5_0: return 8;
    case GgmlType::Q5_1: return 9;
    case GgmlType::Q8_0: return 7;
    case GgmlType::Q2_K: return 10;
    case GgmlType::Q3_K: return 12;
    case GgmlType::Q4_K: return 15;
    case GgmlType::Q5_K: return 17;
    case GgmlType::Q6_K: return 18;
    case GgmlType::TQ1_0: return 36;
    case GgmlType::TQ2_0: return 37;
    case GgmlType::IQ2_XXS: return 19;
    case GgmlType::IQ2_XS: return 20;
    case GgmlType::IQ2_S: return 28;
    case GgmlType::IQ3_XXS: return 23;
    case GgmlType::IQ1_S: return 24;
    case GgmlType::IQ1_M: return 31;
    case GgmlType::IQ4_NL: return 25;
    case GgmlType::IQ4_XS: return 30;
    case GgmlType::IQ3_S: return 26;
    case GgmlType::NVFP4: return 39;
    case GgmlType::Q1_0: return 40;
    case GgmlType::Q2_0: return 41;
    default: return 0;
  }
}

bool is_quantized(GgmlType t) { return gguf::type_traits(t).quantized; }

// sscanf(name, "blk.%d.", &layer) as llama.cpp uses it: -1 when no number follows "blk.".
int layer_of(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  std::size_t i = 4;
  while (i < name.size() && std::isspace(static_cast<unsigned char>(name[i]))) ++i;
  bool neg = false;
  if (i < name.size() && (name[i] == '+' || name[i] == '-')) neg = name[i++] == '-';
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  long long v = 0;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i)
    v = std::min<long long>(v * 10 + (name[i] - '0'), std::numeric_limits<int>::max());
  return static_cast<int>(neg ? -v : v);
}

enum class Category { TokenEmbd, AttnQ, AttnV, AttnK, AttnQkv, AttnKvB, AttnOutput, FfnUp, FfnGate, FfnDown, Output, Other };

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

Category category_of(std::string_view n) {
  if (n == "output.weight") return Category::Output;
  if (n == "token_embd.weight" || n == "per_layer_token_embd.weight") return Category::TokenEmbd;
  if (contains(n, "attn_qkv.weight")) return Category::AttnQkv;
  if (contains(n, "attn_kv_b.weight")) return Category::AttnKvB;
  if (contains(n, "attn_v.weight")) return Category::AttnV;
  if (contains(n, "attn_k.weight")) return Category::AttnK;
  if (contains(n, "attn_q.weight")) return Category::AttnQ;
  if (contains(n, "attn_output.weight")) return Category::AttnOutput;
  if (contains(n, "ffn_up")) return Category::FfnUp;
  if (contains(n, "ffn_gate")) return Category::FfnGate;
  if (contains(n, "ffn_down")) return Category::FfnDown;
  return Category::Other;
}

bool is_attn_v_like(Category c) { return c == Category::AttnV || c == Category::AttnQkv || c == Category::AttnKvB; }

// Small or special 2-D weights llama.cpp never quantizes (matched as substrings).
constexpr std::string_view keep_substrings[] = {
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
    "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
    "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
    "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
    "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
    "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
    ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger",
    "a.rvq.codebook", "mm.a.code_embd"};

std::uint32_t ggml_n_dims(const std::array<std::int64_t, 4>& ne) {
  for (std::uint32_t d = 4; d > 1; --d)
    if (ne[d - 1] != 1) return d;
  return 1;
}

bool allows_quantization(const QuantizeOptions& o, std::string_view name, std::uint32_t n_dims) {
  if (o.copy_only || n_dims < 2) return false;
  if (!name.ends_with("weight")) return false;
  if (o.leave_output && name == "output.weight") return false;
  // Position and token-type embeddings (BERT-style archs).
  if (name == "position_embd.weight" || name == "token_types.weight") return false;
  for (std::string_view s : keep_substrings)
    if (contains(name, s)) return false;
  return true;
}

// What the per-tensor rules need from the model's hyperparameters.
struct ModelInfo {
  std::string arch;
  int n_layer = 0;
  int n_expert = 0;
  int n_gqa = 0;
  bool falcon = false;
  bool llama_70b = false;
};

std::int64_t first_int(const gguf::Reader& r, const std::string& key, std::int64_t fallback) {
  const gguf::Value* v = r.find(key);
  if (v == nullptr) return fallback;
  if (v->type() == gguf::ValueType::Array) {
    std::vector<std::int64_t> a = r.get_int_array(key);
    FUCINA_CHECK(!a.empty(), InvalidFile, "[quantize] metadata key {} is an empty array", key);
    return a[0];
  }
  return r.get_int(key);
}

ModelInfo model_info(const gguf::Reader& r) {
  ModelInfo m;
  m.arch = std::string(r.get_string("general.architecture"));
  const std::int64_t n_layer = r.get_int(m.arch + ".block_count");  // u32 in the file: never cut to int first
  FUCINA_CHECK(n_layer > 0 && n_layer <= 512, InvalidFile, "[quantize] {}.block_count {} out of range (1..512)",
               gguf::printable(m.arch), n_layer);
  m.n_layer = static_cast<int>(n_layer);
  const std::int64_t n_expert = first_int(r, m.arch + ".expert_count", 0);
  FUCINA_CHECK(n_expert >= 0 && n_expert <= 65536, InvalidFile, "[quantize] {}.expert_count {} out of range (0..65536)",
               gguf::printable(m.arch), n_expert);
  m.n_expert = static_cast<int>(n_expert);
  const std::int64_t n_head = first_int(r, m.arch + ".attention.head_count", 0);
  const std::int64_t n_head_kv = first_int(r, m.arch + ".attention.head_count_kv", n_head);
  m.n_gqa = n_head_kv == 0 ? 0 : static_cast<int>(n_head / n_head_kv);
  m.falcon = m.arch == "falcon";
  m.llama_70b = m.arch == "llama" && m.n_layer == 80 && n_head != n_head_kv;
  return m;
}

// llama.cpp's per-tensor mix rules for the ftypes this module supports.
class TypeChooser {
 public:
  TypeChooser(const ModelInfo& m, const QuantizeOptions& o, bool tied, int n_attention_wv)
      : m_(m), o_(o), tied_(tied), n_attention_wv_(n_attention_wv) {}

  GgmlType choose(GgmlType type, std::string_view name, const std::array<std::int64_t, 4>& ne, Category cat,
                  bool& fallback) {
    if (is_quantized(type)) {
      if (!o_.pure) type = mix(type, name, ne[0], cat);
      type = fit(type, ne[0], fallback);
    }
    return type;
  }

 private:
  static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

  int layer_index(int counter, std::string_view name) const {
    if (std::max(1, m_.n_expert) <= 1) return counter;
    const int layer = layer_of(name);
    FUCINA_CHECK(name.starts_with("blk.") && layer != -1, InvalidFile,
                 "[quantize] failed to determine the layer of tensor {}", name);
    FUCINA_CHECK(layer >= 0 && layer < m_.n_layer, InvalidFile, "[quantize] bad layer {} for tensor {}, must be in [0, {})",
                 layer, name, m_.n_layer);
    return layer;
  }

  GgmlType mix(GgmlType t, std::string_view name, std::int64_t nx, Category cat) {
    const F f = o_.ftype;
    const int n = m_.n_layer;
    if (cat == Category::Output || (tied_ && cat == Category::TokenEmbd)) {
      if (m_.falcon || nx % gguf::block_size(t) != 0) return GgmlType::Q8_0;
      return t != GgmlType::Q8_0 ? GgmlType::Q6_K : t;
    }
    if (cat == Category::TokenEmbd) {
      if (f == F::MostlyTQ1_0 || f == F::MostlyTQ2_0) t = GgmlType::Q4_K;
      return t;
    }
    if (is_attn_v_like(cat)) {
      const int i = i_attention_wv_;
      if (f == F::MostlyQ2_K) t = m_.n_gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
      else if (f == F::MostlyQ3_K_M) t = i < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
      else if (f == F::MostlyQ3_K_L) t = GgmlType::Q5_K;
      else if (f == F::MostlyIQ4_NL && m_.n_gqa >= 4) t = GgmlType::Q5_K;
      else if ((f == F::MostlyQ4_K_M || f == F::MostlyQ5_K_M) && use_more_bits(i, n_attention_wv_)) t = GgmlType::Q6_K;
      else if (f == F::MostlyQ4_K_S && i < 4) t = GgmlType::Q5_K;
      if (m_.llama_70b && (t == GgmlType::Q3_K || t == GgmlType::Q4_K)) t = GgmlType::Q5_K;
      if (m_.n_expert == 8) t = GgmlType::Q8_0;
      ++i_attention_wv_;
      return t;
    }
    if (cat == Category::AttnK) return m_.n_expert == 8 ? GgmlType::Q8_0 : t;
    if (cat == Category::FfnDown) {
      const int i = layer_index(i_ffn_down_, name);
      if (f == F::MostlyQ2_K) t = GgmlType::Q3_K;
      else if (f == F::MostlyQ3_K_M)
        t = i < n / 16 ? GgmlType::Q5_K : (!m_.falcon || use_more_bits(i, n)) ? GgmlType::Q4_K : GgmlType::Q3_K;
      else if (f == F::MostlyQ3_K_L) t = m_.falcon ? GgmlType::Q4_K : GgmlType::Q5_K;
      else if (f == F::MostlyQ4_K_M) {
        if (m_.falcon) t = i < n / 16 ? GgmlType::Q6_K : use_more_bits(i, n) ? GgmlType::Q5_K : GgmlType::Q4_K;
        else if (use_more_bits(i, n)) t = GgmlType::Q6_K;
      } else if (i < n / 8 && f == F::MostlyIQ4_NL) t = GgmlType::Q5_K;
      else if (f == F::MostlyQ5_K_M && use_more_bits(i, n)) t = GgmlType::Q6_K;
      else if (f == F::MostlyQ4_K_S && !m_.falcon && i < n / 8) t = GgmlType::Q5_K;
      ++i_ffn_down_;
      return t;
    }
    if (cat == Category::AttnOutput) {
      if (m_.falcon) return f == F::MostlyQ3_K_L ? GgmlType::Q4_K : t;
      if (m_.n_expert == 8) {
        const bool bump = f == F::MostlyQ2_K || f == F::MostlyQ3_K_S || f == F::MostlyQ3_K_M || f == F::MostlyIQ4_NL ||
                          f == F::MostlyQ4_K_S || f == F::MostlyQ4_K_M;
        return bump ? GgmlType::Q5_K : t;
      }
      if (f == F::MostlyQ2_K) return GgmlType::Q3_K;
      if (f == F::MostlyQ3_K_M) return GgmlType::Q4_K;
      if (f == F::MostlyQ3_K_L) return GgmlType::Q5_K;
      return t;
    }
    // ffn_gate / ffn_up have no rule for these ftypes, but llama.cpp still resolves (and
    // validates) the layer of MoE tensors and counts them.
    if (cat == Category::FfnGate) {
      layer_index(i_ffn_gate_++, name);
    } else if (cat == Category::FfnUp) {
      layer_index(i_ffn_up_++, name);
    }
    return t;
  }

  GgmlType fit(GgmlType t, std::int64_t ncols, bool& fallback) {
    if (ncols % gguf::block_size(t) == 0) return t;
    fallback = true;
    GgmlType r = t;
    switch (t) {
      case GgmlType::IQ4_XS: r = GgmlType::IQ4_NL; break;
      case GgmlType::Q2_0:
      case GgmlType::Q2_K:
      case GgmlType::Q3_K:
      case GgmlType::TQ1_0:
      case GgmlType::TQ2_0: r = GgmlType::Q4_0; break;
      case GgmlType::Q4_K: r = GgmlType::Q5_0; break;
      case GgmlType::Q5_K: r = GgmlType::Q5_1; break;
      case GgmlType::Q6_K: r = GgmlType::Q8_0; break;
      default:
        FUCINA_CHECK(gguf::block_size(t) <= 32, Unsupported, "[quantize] no fallback type is defined for {}",
                     gguf::to_string(t));
        break;
    }
    return ncols % gguf::block_size(r) == 0 ? r : GgmlType::F16;
  }

  const ModelInfo& m_;
  const QuantizeOptions& o_;
  bool tied_;
  int n_attention_wv_;
  int i_attention_wv_ = 0, i_ffn_down_ = 0, i_ffn_gate_ = 0, i_ffn_up_ = 0;
};

// The file type llama.cpp's loader reports for a COPY: general.file_type, else a guess.
std::uint32_t input_file_type(const gguf::Reader& r, const std::vector<std::size_t>& order) {
  if (const gguf::Value* v = r.find("general.file_type"); v != nullptr && v->type() == gguf::ValueType::Uint32)
    return v->as<std::uint32_t>();
  std::array<int, gguf::ggml_type_count> n_type{};
  int best = 0;
  GgmlType best_type = GgmlType::F32;
  for (std::size_t i : order) {
    const GgmlType t = r.tensors()[i].type;
    if (++n_type[static_cast<std::uint32_t>(t)] > best) {
      best = n_type[static_cast<std::uint32_t>(t)];
      best_type = t;
    }
  }
  return ftype_of_tensor_type(best_type) | ftype_guessed;
}

bool convertible_source(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 ||
         (is_quantized(t) && find_codec_traits(static_cast<std::uint32_t>(t)).has_value());
}

}  // namespace

std::span<const QuantizeTarget> quantize_targets() { return targets; }

std::optional<QuantizeTarget> find_quantize_target(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const QuantizeTarget& t : targets)
    if (t.name == upper) return t;
  return std::nullopt;
}

ModelPlan plan_quantization(const gguf::Reader& input, const QuantizeOptions& options) {
  const auto tensors = input.tensors();
  std::vector<std::size_t> order(tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::vector<int> layer(tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) layer[i] = layer_of(tensors[i].name);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (layer[a] != layer[b]) return layer[a] < layer[b];
    return tensors[a].name < tensors[b].name;
  });

  ModelPlan plan;
  plan.kv_overrides = options.kv_overrides;
  const GgmlType def = options.copy_only ? GgmlType::F32 : default_type(options.ftype);
  plan.file_type = options.copy_only ? input_file_type(input, order) : static_cast<std::uint32_t>(options.ftype);

  bool tied = true;
  int n_attention_wv = 0;
  for (std::size_t i : order) {
    const Category c = category_of(tensors[i].name);
    if (is_attn_v_like(c)) ++n_attention_wv;
    if (c == Category::Output) tied = false;
  }
  // Only quantizing plans consult the architecture (COPY works on any GGUF).
  std::optional<ModelInfo> info;
  std::optional<TypeChooser> chooser;
  if (!options.copy_only) {
    info = model_info(input);
    chooser.emplace(*info, options, tied, n_attention_wv);
  }

  plan.tensors.reserve(order.size());
  for (std::size_t i : order) {
    const gguf::TensorInfo& t = tensors[i];
    TensorPlan p;
    p.input_index = i;
    p.name = std::string(t.name);
    p.src_type = t.type;
    p.ne = {t.ne[0], t.ne[1], t.ne[2], t.ne[3]};
    p.n_dims = ggml_n_dims(p.ne);
    p.dst_type = t.type;
    if (allows_quantization(options, p.name, p.n_dims))
      p.dst_type = chooser->choose(def, p.name, p.ne, category_of(p.name), p.fallback);
    plan.n_fallback += p.fallback ? 1 : 0;
    p.src_bytes = t.size_bytes;
    const std::uint64_t rows = static_cast<std::uint64_t>(p.ne[1] * p.ne[2] * p.ne[3]);
    p.dst_bytes = rows * gguf::row_size(p.dst_type, static_cast<std::uint64_t>(p.ne[0]));
    if (p.converts()) {
      FUCINA_CHECK(convertible_source(p.src_type), Unsupported, "[quantize] cannot convert tensor {} of type {}",
                   p.name, gguf::to_string(p.src_type));
      FUCINA_CHECK(!is_quantized(p.src_type) || options.allow_requantize, InvalidArgument,
                   "[quantize] tensor {} is already {}; requantizing needs --allow-requantize", p.name,
                   gguf::to_string(p.src_type));
      FUCINA_CHECK(find_codec_traits(static_cast<std::uint32_t>(p.dst_type)).has_value(), Unsupported,
                   "[quantize] no encoder for {} (tensor {})", gguf::to_string(p.dst_type), p.name);
    }
    plan.tensors.push_back(std::move(p));
  }
  return plan;
}

KvOverride parse_kv_override(std::string_view spec) {
  const std::size_t eq = spec.find('=');
  FUCINA_CHECK(eq != std::string_view::npos && eq > 0 && eq < 128, InvalidArgument,
               "[quantize] malformed KV override '{}' (KEY=TYPE:VALUE, KEY under 128 bytes)", spec);
  const std::string key(spec.substr(0, eq));
  const std::string_view rest = spec.substr(eq + 1);
  const auto value_of = [&](std::string_view type) -> std::optional<std::string> {
    if (!rest.starts_with(type)) return std::nullopt;
    return std::string(rest.substr(type.size()));
  };
  if (const auto v = value_of("int:")) {
    std::int64_t i = 0;
    const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), i);
    FUCINA_CHECK(ec == std::errc{} && end == v->data() + v->size() && !v->empty(), InvalidArgument,
                 "[quantize] KV override '{}': '{}' is not an integer", spec, *v);
    const std::uint64_t mag = i < 0 ? 0 - static_cast<std::uint64_t>(i) : static_cast<std::uint64_t>(i);
    FUCINA_CHECK(mag <= 0xFFFFFFFFu, InvalidArgument, "[quantize] KV override '{}': {} does not fit the u32 it is written as",
                 spec, *v);
    return {key, gguf::OwnedValue::scalar(static_cast<std::uint32_t>(mag))};
  }
  if (const auto v = value_of("float:")) {
    char* end = nullptr;
    const double d = std::strtod(v->c_str(), &end);
    FUCINA_CHECK(!v->empty() && end == v->c_str() + v->size() && std::isfinite(static_cast<float>(d)), InvalidArgument,
                 "[quantize] KV override '{}': '{}' is not a finite number", spec, *v);
    return {key, gguf::OwnedValue::scalar(static_cast<float>(d))};
  }
  if (const auto v = value_of("bool:")) {
    FUCINA_CHECK(*v == "true" || *v == "false", InvalidArgument, "[quantize] KV override '{}': a bool is true or false", spec);
    return {key, gguf::OwnedValue::scalar(*v == "true")};
  }
  if (const auto v = value_of("str:")) {
    FUCINA_CHECK(v->size() <= 127, InvalidArgument, "[quantize] KV override '{}': a string value is at most 127 bytes", spec);
    return {key, gguf::OwnedValue::string(*v)};
  }
  fail(ErrorCode::InvalidArgument, fmt::format("[quantize] KV override '{}': TYPE must be int, float, bool or str", spec));
}

gguf::Writer output_layout(const gguf::Reader& input, const ModelPlan& plan) {
  gguf::Writer w;
  for (const gguf::KeyValue& kv : input.metadata()) w.set(kv.key, kv.value);
  w.erase("general.quantization_version");
  w.set_u32("general.quantization_version", quantization_version);
  w.erase("general.file_type");
  w.set_u32("general.file_type", plan.file_type);
  w.erase("split.no");
  w.erase("split.count");
  w.erase("split.tensors.count");
  for (const KvOverride& o : plan.kv_overrides) {
    w.erase(o.key);
    w.set(o.key, o.value);
  }
  for (const TensorPlan& p : plan.tensors)
    w.add_tensor(p.name, p.dst_type, std::span<const std::int64_t>(p.ne.data(), p.n_dims));
  return w;
}

namespace {

// Non-finite source values make llama.cpp's loader reject the file; do the same.
bool row_is_finite(GgmlType t, const std::byte* row, std::int64_t n) {
  std::uint32_t bad = 0;
  if (t == GgmlType::F16) {
    for (std::int64_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, row + 2 * i, 2);
      bad |= static_cast<std::uint32_t>((h & 0x7c00u) == 0x7c00u);
    }
  } else if (t == GgmlType::BF16) {
    for (std::int64_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, row + 2 * i, 2);
      bad |= static_cast<std::uint32_t>((h & 0x7f80u) == 0x7f80u);
    }
  } else if (t == GgmlType::F32) {
    for (std::int64_t i = 0; i < n; ++i) {
      std::uint32_t u;
      std::memcpy(&u, row + 4 * i, 4);
      bad |= static_cast<std::uint32_t>((u & 0x7f800000u) == 0x7f800000u);
    }
  }
  return bad == 0;
}

// Drops the mapped pages of [b, e) that were read: the input is a read-only private file
// mapping, so they fault back in from the page cache if touched again. Keeps the resident
// set near one slab instead of growing to the whole model.
void release_pages(const std::byte* b, const std::byte* e) {
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t lo = (reinterpret_cast<std::uintptr_t>(b) + page - 1) / page * page;
  const std::uintptr_t hi = reinterpret_cast<std::uintptr_t>(e) / page * page;
  if (lo < hi) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

class ModelQuantizer {
 public:
  // release_input: `in` is a Reader::open mapping whose pages may be dropped once read.
  ModelQuantizer(const gguf::Reader& in, const QuantizeOptions& o, const ProgressFn& progress,
                 bool release_input = false)
      : in_(in), progress_(progress), pool_(o.n_threads), plan_(plan_quantization(in, o)),
        release_input_(release_input) {}

  const ModelPlan& plan() const { return plan_; }

  QuantizeStats run(gguf::StreamWriter& out) {
    QuantizeStats s;
    s.n_tensors = plan_.tensors.size();
    s.n_fallback = plan_.n_fallback;
    QuantizeProgress pr;
    pr.count = plan_.tensors.size();
    for (const TensorPlan& p : plan_.tensors) pr.bytes_in_total += p.src_bytes;
    for (std::size_t i = 0; i < plan_.tensors.size(); ++i) {
      const TensorPlan& p = plan_.tensors[i];
      pr.index = i;
      pr.tensor = &p;
      pr.rows_total = p.ne[1] * p.ne[2] * p.ne[3];
      pr.rows_done = 0;
      pr.done = false;
      report(pr);
      const gguf::Bytes src = in_.tensor_data(in_.tensors()[p.input_index]);
      if (p.converts()) {
        convert(p, src, out, pr);
        ++s.n_converted;
      } else {
        check_finite(p, src);
        out.write_tensor(src);
        if (release_input_) release_pages(src.data(), src.data() + src.size());
      }
      s.bytes_in += p.src_bytes;
      s.bytes_out += p.dst_bytes;
      s.n_elements += static_cast<std::uint64_t>(p.ne[0] * pr.rows_total);
      pr.bytes_in_done += p.src_bytes;
      pr.rows_done = pr.rows_total;
      pr.done = true;
      report(pr);
    }
    out.finish();
    return s;
  }

 private:
  void report(const QuantizeProgress& pr) const {
    if (progress_) progress_(pr);
  }

  void check_finite(const TensorPlan& p, gguf::Bytes src) {
    if (p.src_type != GgmlType::F32 && p.src_type != GgmlType::F16 && p.src_type != GgmlType::BF16) return;
    const std::int64_t rows = p.ne[1] * p.ne[2] * p.ne[3];
    const std::uint64_t row_bytes = gguf::row_size(p.src_type, static_cast<std::uint64_t>(p.ne[0]));
    const std::int64_t grain = std::max<std::int64_t>(1, task_elements * 8 / std::max<std::int64_t>(1, p.ne[0]));
    pool_.parallel_range(rows, grain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r)
        FUCINA_CHECK(row_is_finite(p.src_type, src.data() + r * row_bytes, p.ne[0]), InvalidFile,
                     "[quantize] tensor {} has non-finite values in row {}", p.name, r);
    });
  }

  void convert(const TensorPlan& p, gguf::Bytes src, gguf::StreamWriter& out, QuantizeProgress& pr) {
    const std::int64_t n = p.ne[0];
    const std::int64_t rows = pr.rows_total;
    if (n == 0 || rows == 0) return;  // an empty tensor has no bytes to write
    const auto src_t = static_cast<QuantType>(static_cast<std::uint32_t>(p.src_type));
    const auto dst_t = static_cast<QuantType>(static_cast<std::uint32_t>(p.dst_type));
    const std::uint64_t src_row = gguf::row_size(p.src_type, static_cast<std::uint64_t>(n));
    const std::uint64_t dst_row = gguf::row_size(p.dst_type, static_cast<std::uint64_t>(n));
    const std::int64_t slab_rows =
        std::clamp<std::int64_t>(static_cast<std::int64_t>(slab_bytes / std::max<std::uint64_t>(dst_row, 1)), 1, rows);
    buffer_.resize(static_cast<std::size_t>(slab_rows) * dst_row);
    const std::int64_t grain = std::max<std::int64_t>(1, task_elements / std::max<std::int64_t>(1, n));
    // F32 rows are read in place unless the mapping leaves them misaligned.
    const bool direct = p.src_type == GgmlType::F32 && reinterpret_cast<std::uintptr_t>(src.data()) % alignof(float) == 0;
    for (std::int64_t r0 = 0; r0 < rows; r0 += slab_rows) {
      const std::int64_t nr = std::min(slab_rows, rows - r0);
      pool_.parallel_range(nr, grain, [&](std::int64_t b, std::int64_t e) {
        std::vector<float> scratch(direct ? 0 : static_cast<std::size_t>(n));
        for (std::int64_t r = r0 + b; r < r0 + e; ++r) {
          const std::byte* s = src.data() + static_cast<std::uint64_t>(r) * src_row;
          FUCINA_CHECK(row_is_finite(p.src_type, s, n), InvalidFile,
                       "[quantize] tensor {} has non-finite values in row {}", p.name, r);
          const float* f = reinterpret_cast<const float*>(s);
          if (!direct) {
            dequantize_row(src_t, s, scratch.data(), n);
            f = scratch.data();
          }
          quantize_row(dst_t, f, buffer_.data() + static_cast<std::uint64_t>(r - r0) * dst_row, n);
        }
      });
      out.write(gguf::Bytes(buffer_.data(), static_cast<std::size_t>(nr) * dst_row));
      if (release_input_) release_pages(src.data() + r0 * src_row, src.data() + (r0 + nr) * src_row);
      pr.rows_done = r0 + nr;
      if (pr.rows_done < rows) report(pr);
    }
    if (buffer_.size() > slab_bytes / 4) std::vector<std::byte>().swap(buffer_);
  }

  const gguf::Reader& in_;
  const ProgressFn& progress_;
  ThreadPool pool_;
  ModelPlan plan_;
  bool release_input_;
  std::vector<std::byte> buffer_;
};

}  // namespace

QuantizeStats quantize_model(const gguf::Reader& input, const QuantizeOptions& options, gguf::ByteSink sink,
                             const ProgressFn& progress) {
  ModelQuantizer q(input, options, progress);
  gguf::StreamWriter out(output_layout(input, q.plan()), std::move(sink));
  return q.run(out);
}

QuantizeStats quantize_model(const std::filesystem::path& in, const std::filesystem::path& out,
                             const QuantizeOptions& options, const ProgressFn& progress) {
  check_output_path(out, {in});  // before the input is read
  const gguf::Reader r = gguf::Reader::open(in);
  ModelQuantizer q(r, options, progress, /*release_input=*/true);
  // Written next to `out` and renamed over it once complete: a failure leaves `out` as it was.
  gguf::StreamWriter w(output_layout(r, q.plan()), out, std::span(&in, 1));
  return q.run(w);
}

}  // namespace fucina::quant
