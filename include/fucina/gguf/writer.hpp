#pragma once
// GGUF writer with ggml's exact layout (Note [GGUF layout]): header, metadata in insertion
// order, tensor infos, zero padding to the alignment, then each tensor's bytes zero-padded to
// the alignment (the last one too). Offsets are the padded running totals.
//
// Two ways out:
//  - all in memory: add_tensor(..., data) with borrowed spans, then to_bytes()/write_file();
//  - streaming: declare every tensor (no data), then StreamWriter writes the header at once
//    and takes tensor bytes in declaration order, in as many chunks as the caller likes, so
//    a quantizer never holds more than one tensor.
// Re-emitting a file: Writer::from_reader(reader) copies version, metadata payloads (byte
// verbatim), tensor infos and borrowed tensor bytes; a file ggml or gguf-py wrote comes back
// byte for byte. (gguf-py ends a tensor-less file right after the metadata, ggml pads it to
// the alignment: set_pad_tensorless() picks the convention, from_reader() detects it.)
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fucina/core/atomic_file.hpp"
#include "fucina/gguf/format.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/gguf/value.hpp"

namespace fucina::gguf {

class Writer {
 public:
  struct Tensor {
    std::string name;
    GgmlType type = GgmlType::F32;
    std::uint32_t n_dims = 0;
    std::array<std::int64_t, max_dims> ne{1, 1, 1, 1};
    std::uint64_t size_bytes = 0;
    Bytes data;  // borrowed; empty when the bytes will be streamed
  };

  Writer() = default;
  // A writer that reproduces `r`; tensor data are borrowed from r's mapping.
  static Writer from_reader(const Reader& r);

  void set_version(std::uint32_t version);  // 2 or 3 (default 3)
  std::uint32_t version() const { return version_; }

  // ---- metadata: a new key is appended, an existing key keeps its position ----
  // Setting general.alignment (must be a u32 power of two) also sets the layout alignment.
  void set(std::string_view key, OwnedValue value);
  void set(std::string_view key, const Value& value) { set(key, OwnedValue::copy(value)); }
  template <ScalarValue T>
  void set_scalar(std::string_view key, T v) {
    set(key, OwnedValue::scalar(v));
  }
  void set_u8(std::string_view key, std::uint8_t v) { set_scalar(key, v); }
  void set_i8(std::string_view key, std::int8_t v) { set_scalar(key, v); }
  void set_u16(std::string_view key, std::uint16_t v) { set_scalar(key, v); }
  void set_i16(std::string_view key, std::int16_t v) { set_scalar(key, v); }
  void set_u32(std::string_view key, std::uint32_t v) { set_scalar(key, v); }
  void set_i32(std::string_view key, std::int32_t v) { set_scalar(key, v); }
  void set_u64(std::string_view key, std::uint64_t v) { set_scalar(key, v); }
  void set_i64(std::string_view key, std::int64_t v) { set_scalar(key, v); }
  void set_f32(std::string_view key, float v) { set_scalar(key, v); }
  void set_f64(std::string_view key, double v) { set_scalar(key, v); }
  void set_bool(std::string_view key, bool v) { set_scalar(key, v); }
  void set_string(std::string_view key, std::string_view v) { set(key, OwnedValue::string(v)); }
  template <ScalarValue T>
  void set_array(std::string_view key, std::span<const T> items) {
    set(key, OwnedValue::array(items));
  }
  void set_string_array(std::string_view key, std::span<const std::string_view> items) {
    set(key, OwnedValue::string_array(items));
  }
  void set_string_array(std::string_view key, std::span<const std::string> items) {
    set(key, OwnedValue::string_array(items));
  }
  void set_alignment(std::uint32_t alignment) { set_u32(alignment_key, alignment); }
  bool erase(std::string_view key);  // false when absent
  const OwnedValue* find(std::string_view key) const;
  std::size_t n_kv() const { return kvs_.size(); }
  std::uint32_t alignment() const { return alignment_; }
  // Whether a file without tensors still ends padded to the alignment (ggml: yes, default).
  void set_pad_tensorless(bool pad) { pad_tensorless_ = pad; }

  // ---- tensors, in file order ----
  // `ne` in ggml order (ne[0] contiguous), 0..4 dims. `data` is borrowed until written and
  // must be empty (streamed later) or exactly the tensor's byte size. Returns the index.
  std::size_t add_tensor(std::string_view name, GgmlType type, std::span<const std::int64_t> ne, Bytes data = {});
  std::size_t add_tensor(const TensorInfo& info, Bytes data = {}) {
    return add_tensor(info.name, info.type, info.shape(), data);
  }
  std::span<const Tensor> tensors() const { return tensors_; }
  // Replaces the borrowed bytes of tensor `name` (same type and size; a trained copy).
  void set_tensor_data(std::string_view name, Bytes data);

  // ---- layout (depends on the alignment at the time of the call) ----
  std::uint64_t tensor_offset(std::size_t index) const;  // relative to the data section
  std::uint64_t header_size() const;                      // == data section start
  std::uint64_t total_size() const;
  // Header, metadata, tensor infos and the padding up to the data section.
  std::vector<std::byte> header_bytes() const;

  // ---- all in memory: every tensor needs its borrowed data ----
  std::vector<std::byte> to_bytes() const;
  // Through an AtomicFile (core/atomic_file.hpp): `path` is replaced only when complete.
  void write_file(const std::filesystem::path& path) const;

 private:
  std::uint32_t version_ = gguf_version_max;
  std::uint32_t alignment_ = default_alignment;
  bool pad_tensorless_ = true;
  std::vector<std::pair<std::string, OwnedValue>> kvs_;
  std::unordered_map<std::string, std::size_t> kv_index_;
  std::vector<Tensor> tensors_;
  std::unordered_map<std::string, std::size_t> tensor_index_;
};

// Receives the output bytes in order.
using ByteSink = std::function<void(Bytes)>;

// Streams a Writer's layout: the constructor writes the header; write() then takes the
// tensors' bytes in declaration order and inserts the padding; finish() checks every byte
// arrived. The Writer may be discarded once the StreamWriter exists.
class StreamWriter {
 public:
  StreamWriter(const Writer& layout, ByteSink sink);
  // Writes to `path` through an AtomicFile (refusing a `path` that is one of `inputs`);
  // finish() renames the complete file over `path`, destruction before it leaves `path` as it was.
  StreamWriter(const Writer& layout, const std::filesystem::path& path,
               std::span<const std::filesystem::path> inputs = {});
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;
  ~StreamWriter();

  // Appends to the current tensor; a chunk may not run past the current tensor's end.
  void write(Bytes chunk);
  // Writes exactly one whole tensor (the next one) from `data`.
  void write_tensor(Bytes data);
  std::size_t current_tensor() const { return current_; }
  std::uint64_t bytes_written() const { return written_; }
  // Throws InvalidArgument if tensors are missing or incomplete.
  void finish();

 private:
  void start(const Writer& layout);
  void emit(Bytes b);
  void pad();
  void next_tensor();
  void skip_empty_tensors();

  struct Entry {
    std::string name;
    std::uint64_t size;
  };
  std::vector<Entry> tensors_;
  std::uint32_t alignment_;
  ByteSink sink_;
  std::unique_ptr<AtomicFile> file_;
  std::size_t current_ = 0;
  std::uint64_t in_tensor_ = 0;  // bytes of the current tensor already written
  std::uint64_t written_ = 0;
  bool finished_ = false;
};

}  // namespace fucina::gguf
