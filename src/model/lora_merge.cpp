#include "fucina/model/lora_merge.hpp"

#include <cstring>

#include "fucina/core/atomic_file.hpp"
#include "fucina/core/error.hpp"
#include "fucina/gguf/writer.hpp"
#include "fucina/model/f16_matmul.hpp"
#include "fucina/quant/traits.hpp"

namespace fucina::model {

namespace {

constexpr std::int64_t kRowGrain = 16;  // rows per parallel chunk when decoding/encoding

bool adapted(const gguf::TensorInfo& t, std::span<const ScaledLora> adapters) {
  for (const ScaledLora& s : adapters)
    if (s.adapter.find(t.name)) return true;
  return false;
}

// The output's layout: the base's version and metadata (general.alignment included), its
// tensors in its order, with type `types[i]`.
gguf::Writer layout(const gguf::Reader& base, std::span<const gguf::GgmlType> types) {
  gguf::Writer w;
  w.set_version(base.version());
  for (const gguf::KeyValue& kv : base.metadata()) w.set(kv.key, kv.value);
  for (std::size_t i = 0; i < base.tensors().size(); ++i) w.add_tensor(base.tensors()[i].name, types[i], base.tensors()[i].shape());
  return w;
}

// Rows of `values` ([rows][n] f32) encoded as `type` (the reference encoders: the bytes
// llama-quantize writes for the same values).
std::vector<std::byte> encode(ThreadPool& pool, gguf::GgmlType type, const std::vector<float>& values, std::int64_t n,
                              std::int64_t rows) {
  const auto rb = static_cast<std::int64_t>(gguf::row_size(type, static_cast<std::uint64_t>(n)));
  std::vector<std::byte> out(static_cast<std::size_t>(rb * rows));
  pool.parallel_range(rows, kRowGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) quant::quantize_row(type, values.data() + r * n, out.data() + r * rb, n);
  });
  return out;
}

}  // namespace

std::vector<float> merge_lora_tensor(ThreadPool& pool, const gguf::Reader& base, const gguf::TensorInfo& t,
                                     std::span<const ScaledLora> adapters) {
  const std::int64_t n_in = t.ne[0], n_out = t.ne[1];
  FUCINA_CHECK(t.ne[2] == 1 && t.ne[3] == 1, InvalidArgument, "[lora] '{}' is not a matrix", gguf::printable(t.name));
  const auto rb = static_cast<std::int64_t>(gguf::row_size(t.type, static_cast<std::uint64_t>(n_in)));
  const std::byte* src = base.tensor_data(t).data();
  std::vector<float> w(static_cast<std::size_t>(n_in * n_out));
  pool.parallel_range(n_out, kRowGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) quant::dequantize_row(t.type, src + r * rb, w.data() + r * n_in, n_in);
  });

  std::vector<float> a_t, delta(w.size());
  for (const ScaledLora& s : adapters) {
    const LoraMatrix* m = s.adapter.find(t.name);
    if (!m) continue;
    FUCINA_CHECK(m->n_in == n_in && m->n_out == n_out, InvalidArgument,
                 "[lora] '{}': the adapter is for [{}, {}], the tensor is [{}, {}]", gguf::printable(t.name), m->n_in,
                 m->n_out, n_in, n_out);
    // ggml_mul_mat(cont(transpose(A)), B): src0 = Aᵀ (n_in rows of rank), src1 = B.
    const std::int64_t rank = m->rank;
    a_t.resize(static_cast<std::size_t>(n_in * rank));
    for (std::int64_t k = 0; k < rank; ++k)
      for (std::int64_t i = 0; i < n_in; ++i) a_t[i * rank + k] = m->a[k * n_in + i];
    // llamafile's tinyBLAS takes it for >= 2 src1 rows, k % 16 == 0 and src0 rows % 4 == 0.
    const GgmlOrder order = n_out >= 2 && rank % 16 == 0 && n_in % 4 == 0 ? GgmlOrder::tiled : GgmlOrder::vec;
    matmul_f32(pool, m->b.data(), n_out, rank, a_t.data(), rank, n_in, delta.data(), order);
    const float scale = s.adapter.scale(*m, s.user_scale);
    // ggml_scale then ggml_add(delta, cur): two roundings, never fused (-ffp-contract=off).
    for (std::size_t i = 0; i < w.size(); ++i) {
      const float d = delta[i] * scale;
      w[i] = d + w[i];
    }
  }
  return w;
}

LoraMergeStats export_lora(const std::filesystem::path& base_path, std::span<const std::filesystem::path> adapter_paths,
                           std::span<const ScaledLora> adapters, const std::filesystem::path& out,
                           const LoraMergeOptions& options) {
  std::vector<std::filesystem::path> inputs{base_path};
  inputs.insert(inputs.end(), adapter_paths.begin(), adapter_paths.end());
  check_output_path(out, inputs);
  FUCINA_CHECK(!options.type || !options.type->copy_only, InvalidArgument, "[lora] --type COPY is not a conversion");

  const auto base = gguf::Reader::open(base_path);
  FUCINA_CHECK(!base.contains("split.count"), Unsupported, "[lora] {}: split models are not supported",
               base_path.string());
  for (const ScaledLora& s : adapters) check_lora_matches(s.adapter, base);

  // Merged tensors keep their type, or go through f32 when the whole model is converted.
  std::vector<gguf::GgmlType> types;
  for (const auto& t : base.tensors()) {
    const bool merge = adapted(t, adapters);
    if (merge && !options.type)
      FUCINA_CHECK(quant::codec_traits(t.type).can_quantize, Unsupported,
                   "[lora] '{}' is {}, which Fucina cannot re-encode; pass --type", gguf::printable(t.name),
                   gguf::to_string(t.type));
    types.push_back(merge && options.type ? gguf::GgmlType::F32 : t.type);
  }

  ThreadPool pool(options.n_threads);
  LoraMergeStats stats;
  stats.n_tensors = base.tensors().size();
  const auto write_tensors = [&](gguf::StreamWriter& sw) {
    for (std::size_t i = 0; i < base.tensors().size(); ++i) {
      const gguf::TensorInfo& t = base.tensors()[i];
      const bool merge = adapted(t, adapters);
      if (merge) {
        const auto bytes = encode(pool, types[i], merge_lora_tensor(pool, base, t, adapters), t.ne[0], t.ne[1]);
        sw.write_tensor(bytes);
        ++stats.n_merged;
      } else {
        sw.write_tensor(base.tensor_data(t));
      }
      base.release_pages(base.tensor_data(t));  // read once: keep RSS near one tensor, not the model
    }
    sw.finish();
  };

  const gguf::Writer merged_layout = layout(base, types);
  if (!options.type) {
    gguf::StreamWriter sw(merged_layout, out, inputs);
    write_tensors(sw);
    stats.bytes_out = sw.bytes_written();
    return stats;
  }
  // Converted: the merged model (merged tensors in f32) in memory, then quantize_model.
  std::vector<std::byte> merged;
  {
    gguf::StreamWriter sw(merged_layout, [&](gguf::Bytes b) { gguf::detail::append_bytes(merged, b.data(), b.size()); });
    write_tensors(sw);
  }
  const auto merged_reader = gguf::Reader::parse(std::move(merged));
  quant::QuantizeOptions qo;
  qo.ftype = options.type->ftype;
  qo.allow_requantize = true;
  qo.n_threads = options.n_threads;
  AtomicFile file(out, inputs);
  quant::quantize_model(merged_reader, qo, [&](gguf::Bytes b) { file.write(b); });
  file.commit();
  stats.bytes_out = file.bytes_written();
  return stats;
}

}  // namespace fucina::model
