#include "fucina/model/lora.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <unordered_map>

#include "fucina/core/error.hpp"
#include "fucina/core/rng.hpp"
#include "fucina/gguf/writer.hpp"
#include "fucina/model/synth.hpp"
#include "fucina/quant/traits.hpp"

namespace fucina::model {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) { return s.size() >= suffix.size() && s.ends_with(suffix); }

// The f32 values of a 2-D f32/f16/bf16 tensor.
std::vector<float> read_f32(const gguf::Reader& file, const gguf::TensorInfo& t, std::string_view what) {
  FUCINA_CHECK(t.type == gguf::GgmlType::F32 || t.type == gguf::GgmlType::F16 || t.type == gguf::GgmlType::BF16,
               Unsupported, "[lora] {}: tensor '{}' is {}; LoRA tensors must be f32, f16 or bf16", what,
               gguf::printable(t.name), gguf::to_string(t.type));
  std::vector<float> out(static_cast<std::size_t>(t.n_elements()));
  quant::dequantize_row(t.type, file.tensor_data(t).data(), out.data(), t.n_elements());
  return out;
}

static_assert(lora_a_suffix.size() == lora_b_suffix.size(), "read_lora cuts either suffix by one length");

bool is_2d(const gguf::TensorInfo& t) { return t.n_dims <= 2 && t.ne[2] == 1 && t.ne[3] == 1; }

}  // namespace

float LoraAdapter::scale(const LoraMatrix& m, float user_scale) const {
  return alpha != 0.0f ? user_scale * alpha / static_cast<float>(m.rank) : user_scale;
}

const LoraMatrix* LoraAdapter::find(std::string_view target) const {
  for (const auto& m : matrices)
    if (m.target == target) return &m;
  return nullptr;
}

LoraAdapter read_lora(const std::filesystem::path& path) {
  return read_lora(gguf::Reader::open(path), path.string());
}

LoraAdapter read_lora(const gguf::Reader& file, std::string_view what) {
  const auto key_string = [&](std::string_view key) -> std::string {
    const gguf::Value* v = file.find(key);
    return v ? std::string(file.get_string(key)) : std::string();
  };
  const std::string general_type = key_string("general.type");
  FUCINA_CHECK(general_type == "adapter", InvalidFile, "[lora] {}: general.type is '{}', expected 'adapter' (not a LoRA adapter)",
               what, gguf::printable(general_type));
  const std::string adapter_type = key_string("adapter.type");
  FUCINA_CHECK(adapter_type == "lora", InvalidFile, "[lora] {}: adapter.type is '{}', expected 'lora'", what,
               gguf::printable(adapter_type));
  LoraAdapter out;
  out.arch = key_string("general.architecture");
  FUCINA_CHECK(!out.arch.empty(), InvalidFile, "[lora] {}: missing general.architecture", what);
  out.name = key_string("general.name");
  if (file.contains("adapter.lora.alpha")) out.alpha = file.get_f32("adapter.lora.alpha");
  FUCINA_CHECK(std::isfinite(out.alpha), InvalidFile, "[lora] {}: adapter.lora.alpha is not finite", what);

  // Pair lora_a with lora_b by base name, in order of first appearance.
  struct Pair {
    std::string target;
    const gguf::TensorInfo* a = nullptr;
    const gguf::TensorInfo* b = nullptr;
  };
  std::vector<Pair> pairs;
  std::unordered_map<std::string, std::size_t> index;
  for (const auto& t : file.tensors()) {
    const bool is_a = ends_with(t.name, lora_a_suffix), is_b = ends_with(t.name, lora_b_suffix);
    if (!is_a && !is_b) {
      if (ends_with(t.name, "_norm.weight")) continue;  // llama.cpp skips norm vectors too
      fail(ErrorCode::InvalidFile, fmt::format("[lora] {}: tensor '{}' is neither a .lora_a nor a .lora_b", what,
                                               gguf::printable(t.name)));
    }
    std::string target(t.name.substr(0, t.name.size() - lora_a_suffix.size()));
    auto [it, added] = index.try_emplace(target, pairs.size());
    if (added) pairs.push_back({target});
    (is_a ? pairs[it->second].a : pairs[it->second].b) = &t;
  }

  for (const Pair& p : pairs) {
    const std::string name = gguf::printable(p.target);
    FUCINA_CHECK(p.a && p.b, InvalidFile, "[lora] {}: '{}' has a {} but no {}", what, name,
                 p.a ? lora_a_suffix : lora_b_suffix, p.a ? lora_b_suffix : lora_a_suffix);
    FUCINA_CHECK(!p.target.starts_with("token_embd"), Unsupported,
                 "[lora] {}: '{}': token-embedding adapters are not supported", what, name);
    FUCINA_CHECK(is_2d(*p.a) && is_2d(*p.b), InvalidFile, "[lora] {}: '{}': lora_a and lora_b must be 2-D", what, name);
    FUCINA_CHECK(p.a->ne[1] == p.b->ne[0], InvalidFile,
                 "[lora] {}: '{}': rank mismatch, lora_a has {} rows but lora_b has {} columns", what, name, p.a->ne[1],
                 p.b->ne[0]);
    FUCINA_CHECK(p.a->ne[1] > 0 && p.a->ne[0] > 0 && p.b->ne[1] > 0, InvalidFile, "[lora] {}: '{}' has an empty dimension",
                 what, name);
    LoraMatrix m;
    m.target = p.target;
    m.rank = p.a->ne[1];
    m.n_in = p.a->ne[0];
    m.n_out = p.b->ne[1];
    m.a = read_f32(file, *p.a, what);
    m.b = read_f32(file, *p.b, what);
    out.matrices.push_back(std::move(m));
  }
  return out;
}

void check_lora_matches(const LoraAdapter& adapter, const gguf::Reader& base) {
  const std::string_view base_arch = base.get_string("general.architecture");
  FUCINA_CHECK(adapter.arch == base_arch, InvalidFile, "[lora] the adapter is for architecture '{}', the model is '{}'",
               gguf::printable(adapter.arch), gguf::printable(base_arch));
  for (const LoraMatrix& m : adapter.matrices) {
    const gguf::TensorInfo* t = base.find_tensor(m.target);
    FUCINA_CHECK(t, InvalidFile, "[lora] adapter tensor '{}' does not exist in the base model (wrong base model?)",
                 gguf::printable(m.target));
    FUCINA_CHECK(is_2d(*t) && t->ne[0] == m.n_in && t->ne[1] == m.n_out, InvalidFile,
                 "[lora] '{}': the adapter is for [{}, {}] (n_in, n_out), the base tensor is [{}, {}] (wrong base model?)",
                 gguf::printable(m.target), m.n_in, m.n_out, t->ne[0], t->ne[1]);
  }
}

void write_lora(const std::filesystem::path& out, const LoraAdapter& adapter) {
  FUCINA_CHECK(!adapter.arch.empty(), InvalidArgument, "[lora] write_lora: the adapter has no architecture");
  gguf::Writer w;
  w.set_string("general.architecture", adapter.arch);
  w.set_string("general.type", "adapter");
  if (!adapter.name.empty()) w.set_string("general.name", adapter.name);
  w.set_string("adapter.type", "lora");
  w.set_f32("adapter.lora.alpha", adapter.alpha);
  const auto bytes = [](const std::vector<float>& v) { return std::as_bytes(std::span(v)); };
  for (const LoraMatrix& m : adapter.matrices) {
    FUCINA_CHECK(m.rank > 0 && m.n_in > 0 && m.n_out > 0 && m.a.size() == static_cast<std::size_t>(m.rank * m.n_in) &&
                     m.b.size() == static_cast<std::size_t>(m.n_out * m.rank),
                 InvalidArgument, "[lora] write_lora: '{}' has inconsistent sizes (rank {}, n_in {}, n_out {}, {} + {} values)",
                 m.target, m.rank, m.n_in, m.n_out, m.a.size(), m.b.size());
    const std::array<std::int64_t, 2> ne_a{m.n_in, m.rank}, ne_b{m.rank, m.n_out};
    w.add_tensor(m.target + std::string(lora_a_suffix), gguf::GgmlType::F32, ne_a, bytes(m.a));
    w.add_tensor(m.target + std::string(lora_b_suffix), gguf::GgmlType::F32, ne_b, bytes(m.b));
  }
  w.write_file(out);
}

std::vector<std::string> parse_lora_targets(std::string_view list) {
  std::vector<std::string> out;
  if (list == "all") {
    for (const LoraTarget& t : lora_targets) out.emplace_back(t.name);
    return out;
  }
  for (std::size_t b = 0; b <= list.size();) {
    const std::size_t e = std::min(list.find(',', b), list.size());
    const std::string_view name = list.substr(b, e - b);
    FUCINA_CHECK(std::any_of(std::begin(lora_targets), std::end(lora_targets), [&](const LoraTarget& t) { return t.name == name; }),
                 InvalidArgument, "[lora] unknown LoRA target '{}' (known: q, k, v, o, gate, up, down)", name);
    if (std::find(out.begin(), out.end(), name) == out.end()) out.emplace_back(name);
    b = e + 1;
  }
  return out;
}

std::vector<std::string> lora_target_tensors(const gguf::Reader& base, std::string_view targets) {
  std::vector<std::string> suffixes;  // ".attn_q.weight" style
  for (const std::string& name : parse_lora_targets(targets))
    for (const LoraTarget& t : lora_targets)
      if (t.name == name) suffixes.push_back(fmt::format(".{}.weight", t.tensor));
  std::vector<std::string> out;
  std::vector<bool> found(suffixes.size(), false);
  for (const auto& t : base.tensors()) {
    if (!t.name.starts_with("blk.") || !is_2d(t)) continue;
    for (std::size_t i = 0; i < suffixes.size(); ++i)
      if (ends_with(t.name, suffixes[i])) {
        out.emplace_back(t.name);
        found[i] = true;
      }
  }
  for (std::size_t i = 0; i < suffixes.size(); ++i)
    FUCINA_CHECK(found[i], InvalidArgument, "[lora] LoRA target '{}': the model has no 2-D tensor blk.N{}",
                 suffixes[i].substr(1, suffixes[i].size() - 8), suffixes[i]);
  return out;
}

LoraAdapter random_lora(const gguf::Reader& base, const RandomLoraSpec& spec) {
  FUCINA_CHECK(spec.rank > 0, InvalidArgument, "[lora] the rank must be positive, got {}", spec.rank);
  LoraAdapter out;
  out.arch = std::string(base.get_string("general.architecture"));
  out.alpha = spec.alpha;
  const auto targets = lora_target_tensors(base, spec.targets);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const gguf::TensorInfo& t = base.tensor(targets[i]);
    LoraMatrix m{targets[i], spec.rank, t.ne[0], t.ne[1], {}, {}};
    m.a.resize(static_cast<std::size_t>(m.rank * m.n_in));
    m.b.resize(static_cast<std::size_t>(m.n_out * m.rank));
    synth_normals(rng::bits(spec.seed, 2 * i), 0, m.a);
    synth_normals(rng::bits(spec.seed, 2 * i + 1), 0, m.b);
    const float a_std = 1.0f / std::sqrt(static_cast<float>(m.n_in));
    for (float& x : m.a) x *= a_std;
    for (float& x : m.b) x *= spec.b_std;
    out.matrices.push_back(std::move(m));
  }
  return out;
}

}  // namespace fucina::model
