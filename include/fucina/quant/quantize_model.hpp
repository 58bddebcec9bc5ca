#pragma once
// Whole-model quantization of a GGUF file, reproducing llama-quantize's output byte for byte.
//
// Note [llama-quantize output]
// What llama.cpp's llama_model_quantize (no imatrix, no overrides) writes, and so what
// quantize_model writes:
//  1. Metadata: every input key in input order; then general.quantization_version (u32 2)
//     and general.file_type (u32 ftype) are removed and appended in that order; split.* keys
//     are dropped. GGUF v3, alignment 32.
//  2. Tensor order: by layer number parsed from a "blk.%d." prefix (-1 for none), then by
//     name (bytewise). n_dims drops trailing 1-sized dims (ggml_n_dims).
//  3. Which tensors are quantized: >= 2 dims, name ends in "weight", not a norm, not
//     output.weight when leave_output is set, not MoE routers, position/type embeddings,
//     conv1d, RWKV/multimodal small weights (list in quantize_model.cpp).
//  4. Target type: the ftype's default type, adjusted per tensor category (output,
//     token_embd, attn_v, attn_k, attn_q, attn_output, attn_qkv, ffn_up/gate/down) by
//     llama.cpp's mix rules unless pure; then a fallback when ne[0] is not a multiple of
//     the block (Q4_K->Q5_0, Q5_K->Q5_1, Q6_K->Q8_0, Q2_K/Q3_K/TQ*->Q4_0, else F16).
//  5. Rows are encoded independently with ggml's reference encoders (no imatrix), so
//     threading never changes the bytes.
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fucina/gguf/reader.hpp"
#include "fucina/gguf/writer.hpp"

namespace fucina::quant {

// llama.cpp's llama_ftype ids, the value of general.file_type.
enum class FileType : std::uint32_t {
  AllF32 = 0,
  MostlyF16 = 1,
  MostlyQ4_0 = 2,
  MostlyQ4_1 = 3,
  MostlyQ8_0 = 7,
  MostlyQ5_0 = 8,
  MostlyQ5_1 = 9,
  MostlyQ2_K = 10,
  MostlyQ3_K_S = 11,
  MostlyQ3_K_M = 12,
  MostlyQ3_K_L = 13,
  MostlyQ4_K_S = 14,
  MostlyQ4_K_M = 15,
  MostlyQ5_K_S = 16,
  MostlyQ5_K_M = 17,
  MostlyQ6_K = 18,
  MostlyIQ4_NL = 25,
  MostlyBF16 = 32,
  MostlyTQ1_0 = 36,
  MostlyTQ2_0 = 37,
};

// One TYPE a user can ask for (llama-quantize's spelling).
struct QuantizeTarget {
  std::string_view name;  // e.g. "Q4_K_M"
  FileType ftype;
  bool copy_only;         // COPY: re-emit every tensor unchanged
  std::string_view description;
};

// Every supported TYPE, in llama-quantize's listing order.
std::span<const QuantizeTarget> quantize_targets();
// Case-insensitive lookup, aliases included (Q4_K = Q4_K_M, ...); nullopt when unknown.
std::optional<QuantizeTarget> find_quantize_target(std::string_view name);

// A metadata key set in the output, llama-quantize's `--override-kv KEY=TYPE:VALUE`: TYPE is
// int (written as u32 of the absolute value, as llama-quantize does), float (f32), bool
// (true/false) or str (at most 127 bytes). Applied last: an existing key moves to the end.
struct KvOverride {
  std::string key;
  gguf::OwnedValue value;
};
// Throws InvalidArgument naming the problem for a malformed spec.
KvOverride parse_kv_override(std::string_view spec);

struct QuantizeOptions {
  FileType ftype = FileType::MostlyQ8_0;
  bool copy_only = false;
  bool pure = false;              // every quantizable tensor gets the default type (fallbacks still apply)
  bool leave_output = false;      // keep output.weight unquantized (--leave-output-tensor)
  bool allow_requantize = false;  // accept already-quantized inputs (dequantized first)
  int n_threads = 0;              // 0: all hardware threads
  std::vector<KvOverride> kv_overrides{};
};

// What happens to one tensor.
struct TensorPlan {
  std::size_t input_index = 0;  // index into Reader::tensors()
  std::string name;
  gguf::GgmlType src_type = gguf::GgmlType::F32;
  gguf::GgmlType dst_type = gguf::GgmlType::F32;
  std::uint32_t n_dims = 1;  // as written (trailing 1s dropped)
  std::array<std::int64_t, 4> ne{1, 1, 1, 1};
  bool fallback = false;  // the chosen type did not fit ne[0]
  std::uint64_t src_bytes = 0;
  std::uint64_t dst_bytes = 0;
  bool converts() const { return src_type != dst_type; }
};

struct ModelPlan {
  std::vector<TensorPlan> tensors;  // in output order
  std::uint32_t file_type = 0;      // value written to general.file_type
  int n_fallback = 0;
  std::vector<KvOverride> kv_overrides{};  // set after the input's metadata
};

// Chooses every tensor's output type and order. Throws fucina::Error (InvalidFile for a
// missing/odd architecture key, Unsupported for a conversion this build cannot do).
ModelPlan plan_quantization(const gguf::Reader& input, const QuantizeOptions& options);

// The output file's layout (metadata per Note [llama-quantize output], declared tensors).
gguf::Writer output_layout(const gguf::Reader& input, const ModelPlan& plan);

// Progress, reported on the calling thread: once when a tensor starts (rows_done == 0),
// after each slab of rows, and once when it is written (done).
struct QuantizeProgress {
  std::size_t index = 0;  // position in plan.tensors
  std::size_t count = 0;
  const TensorPlan* tensor = nullptr;
  std::int64_t rows_done = 0;
  std::int64_t rows_total = 0;
  bool done = false;
  std::uint64_t bytes_in_done = 0;  // over the whole model so far
  std::uint64_t bytes_in_total = 0;
};
using ProgressFn = std::function<void(const QuantizeProgress&)>;

struct QuantizeStats {
  std::size_t n_tensors = 0;
  std::size_t n_converted = 0;
  int n_fallback = 0;
  std::uint64_t bytes_in = 0;   // tensor data
  std::uint64_t bytes_out = 0;  // tensor data
  std::uint64_t n_elements = 0;
};

// Streams the quantized model into `sink` (header first, then one tensor at a time). Memory
// stays near one slab of rows (max 64 MiB of output) plus the mapped input.
QuantizeStats quantize_model(const gguf::Reader& input, const QuantizeOptions& options, gguf::ByteSink sink,
                             const ProgressFn& progress = {});
// Same, reading `in` and writing `out` through an AtomicFile (core/atomic_file.hpp): `out` is
// checked before `in` is read (absent, or a regular file that is not `in`) and replaced only
// once complete; on any failure it keeps what it held.
QuantizeStats quantize_model(const std::filesystem::path& in, const std::filesystem::path& out,
                             const QuantizeOptions& options, const ProgressFn& progress = {});

}  // namespace fucina::quant
