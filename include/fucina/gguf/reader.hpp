#pragma once
// GGUF reader: validates a whole file up front, then serves metadata and tensor bytes as
// zero-copy views into a read-only mmap (or into a caller's byte span).
//
// Note [Reader validation]
// Reader::open/parse check every structural rule before returning (layout: Note [GGUF
// layout]): magic, version 2..3, counts that the remaining bytes could hold (checked before
// any allocation), every string/array length against the bytes left, known value and ggml
// types, array nesting <= max_array_depth, non-empty unique keys, unique tensor names,
// n_dims <= 4, dims >= 0 whose product and byte size do not overflow, ne[0] a multiple of
// the block size, general.alignment a u32 power of two, the data section and every tensor
// inside the file, and tensor offsets multiples of the alignment. Any failure throws
// fucina::Error(InvalidFile) whose message names the problem and ends in its byte offset.
// Tensors may appear in any order and may overlap; ggml itself writes them packed.
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fucina/gguf/format.hpp"
#include "fucina/gguf/value.hpp"

namespace fucina::gguf {

// A string from a file (key, name, architecture) made safe for a one-line message: control
// and non-ASCII bytes (a NUL too) become '?', and it is cut after 80 bytes.
std::string printable(std::string_view s);

struct KeyValue {
  std::string_view key;
  Value value;
  std::uint64_t offset = 0;  // byte offset of the record (its key length) in the file
};

struct TensorInfo {
  std::string_view name;
  GgmlType type = GgmlType::F32;
  std::uint32_t n_dims = 0;
  std::array<std::int64_t, max_dims> ne{1, 1, 1, 1};  // ggml order: ne[0] is contiguous; unused dims are 1
  std::uint64_t offset = 0;                            // relative to the data section, as stored
  std::uint64_t size_bytes = 0;
  std::uint64_t info_offset = 0;  // byte offset of the tensor info record in the file

  std::span<const std::int64_t> shape() const { return {ne.data(), n_dims}; }
  std::int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class Reader {
 public:
  // Maps `path` read-only; the mapping lives as long as the Reader (or a copy of it).
  static Reader open(const std::filesystem::path& path);
  // Reads the header and maps only the tensors `map_tensor` accepts (each run of accepted
  // neighbours one mapping): the others take no address space, for a file larger than the
  // process may map (RLIMIT_AS) whose other tensors are read with pread (model/expert_store.hpp).
  // tensor_data of a tensor not mapped throws InvalidArgument.
  static Reader open(const std::filesystem::path& path, const std::function<bool(const TensorInfo&)>& map_tensor);
  // Parses bytes the caller keeps alive for the Reader's lifetime.
  static Reader parse(Bytes bytes);
  // Parses and keeps `bytes` (handy for small generated files and tests).
  static Reader parse(std::vector<std::byte> bytes);

  std::uint32_t version() const { return version_; }
  std::uint32_t alignment() const { return alignment_; }
  Bytes bytes() const { return bytes_; }             // the whole file (the header only when opened in part)
  std::uint64_t file_size() const { return file_size_; }
  // Drops the resident pages of the whole pages inside `range` from this process (they
  // refault from the file on the next read): for data copied elsewhere, such as repacked
  // weights. A no-op unless the Reader maps a file.
  void release_pages(Bytes range) const;
  // Start of the data section: header_end() rounded up to the alignment. A tensor-less file
  // may end before it (gguf-py does not pad those).
  std::uint64_t data_offset() const { return data_offset_; }
  std::uint64_t header_end() const { return header_end_; }    // end of the tensor infos (before padding)

  // ---- metadata, in file order ----
  std::span<const KeyValue> metadata() const { return kvs_; }
  const KeyValue* find_kv(std::string_view key) const;
  const Value* find(std::string_view key) const;  // nullptr when absent
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // Throws InvalidFile "missing key" when absent.
  const Value& get(std::string_view key) const;

  // Exact-type getters: throw InvalidFile naming the key, both types and the byte offset.
  std::string_view get_string(std::string_view key) const;
  bool get_bool(std::string_view key) const { return get_as<bool>(key); }
  std::uint8_t get_u8(std::string_view key) const { return get_as<std::uint8_t>(key); }
  std::int8_t get_i8(std::string_view key) const { return get_as<std::int8_t>(key); }
  std::uint16_t get_u16(std::string_view key) const { return get_as<std::uint16_t>(key); }
  std::int16_t get_i16(std::string_view key) const { return get_as<std::int16_t>(key); }
  std::uint32_t get_u32(std::string_view key) const { return get_as<std::uint32_t>(key); }
  std::int32_t get_i32(std::string_view key) const { return get_as<std::int32_t>(key); }
  std::uint64_t get_u64(std::string_view key) const { return get_as<std::uint64_t>(key); }
  std::int64_t get_i64(std::string_view key) const { return get_as<std::int64_t>(key); }
  float get_f32(std::string_view key) const { return get_as<float>(key); }
  double get_f64(std::string_view key) const { return get_as<double>(key); }
  template <ScalarValue T>
  T get_as(std::string_view key) const {
    return get_typed(key, value_type_of<T>).template as<T>();
  }
  // Any integer type, widened (writers disagree on u32 vs i32 vs u64 for counts).
  std::int64_t get_int(std::string_view key) const;
  // Any integer or floating type, as double.
  double get_number(std::string_view key) const;

  // Arrays. get_array<T> requires element type exactly T; get_int_array accepts any integer
  // element type; get_string_array's views point into the file.
  ArrayView get_array_view(std::string_view key) const;
  template <ScalarValue T>
  std::vector<T> get_array(std::string_view key) const {
    return array_checked(key, value_type_of<T>).template to_vector<T>();
  }
  std::vector<std::int64_t> get_int_array(std::string_view key) const;
  std::vector<std::string_view> get_string_array(std::string_view key) const;

  // ---- tensors, in file order ----
  std::span<const TensorInfo> tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent
  const TensorInfo& tensor(std::string_view name) const;       // throws InvalidFile when absent
  // The tensor's bytes (size_bytes long) inside the mapping; never copies.
  Bytes tensor_data(const TensorInfo& info) const;

 private:
  Reader() = default;
  void parse_all();
  const Value& get_typed(std::string_view key, ValueType t) const;
  ArrayView array_checked(std::string_view key, ValueType elem) const;

  std::shared_ptr<const void> owner_;  // the mapping or owned buffer, if any
  bool mapped_ = false;                // owner_ is a file mapping
  Bytes bytes_;
  std::uint64_t file_size_ = 0;  // bytes_.size() unless opened in part
  // Opened in part: the mapped runs, by file offset; bytes_ holds the header only.
  struct Region {
    std::uint64_t offset;
    Bytes bytes;
  };
  std::vector<Region> regions_;
  bool partial_ = false;
  std::uint32_t version_ = 0;
  std::uint32_t alignment_ = default_alignment;
  std::uint64_t data_offset_ = 0;
  std::uint64_t header_end_ = 0;
  std::vector<KeyValue> kvs_;
  std::unordered_map<std::string_view, std::size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, std::size_t> tensor_index_;
};

}  // namespace fucina::gguf
