#pragma once
// StateDict: named arrays (f32, i64 or f64) that optimizer state and parameters are saved
// as, with a small self-describing binary file format.
//
// Note [Optimizer state file]: little-endian, in order:
//   magic   8 bytes "FZOPTST1"
//   u64     record count
//   records sorted by name, each:
//     u32 name length, name bytes (UTF-8, no terminator)
//     u8  dtype (0 f32, 1 i64, 2 f64)
//     u8  rank (<= 8), then rank x i64 dims (each >= 0)
//     numel x element bytes
//   u64     FNV-1a 64 of every preceding byte (detects truncation and corruption)
// Nothing follows the checksum. Files are written through an AtomicFile (a temporary file
// renamed over the path once complete), so a crash never leaves a half-written file there.
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace fucina::optim {

enum class RecordType : std::uint8_t { f32 = 0, i64 = 1, f64 = 2 };

struct Record {
  RecordType type = RecordType::f32;
  std::vector<std::int64_t> shape;
  std::vector<float> f32;
  std::vector<std::int64_t> i64;
  std::vector<double> f64;
};

class StateDict {
 public:
  void put_f32(const std::string& name, std::span<const std::int64_t> shape, std::span<const float> data);
  void put_i64(const std::string& name, std::int64_t value);  // shape []
  void put_i64s(const std::string& name, std::span<const std::int64_t> values);  // shape [n]
  void put_f64(const std::string& name, double value);

  bool contains(const std::string& name) const { return records_.count(name) != 0; }
  const Record* find(const std::string& name) const;
  // Typed getters: throw fucina::Error(InvalidFile) when missing or of the wrong type/shape.
  std::span<const float> get_f32(const std::string& name, std::span<const std::int64_t> shape) const;
  std::int64_t get_i64(const std::string& name) const;
  std::span<const std::int64_t> get_i64s(const std::string& name) const;
  double get_f64(const std::string& name) const;

  const std::map<std::string, Record>& records() const noexcept { return records_; }
  std::size_t size() const noexcept { return records_.size(); }

  std::vector<std::uint8_t> to_bytes() const;
  static StateDict from_bytes(std::span<const std::uint8_t> bytes);
  void save(const std::filesystem::path& path) const;  // atomic replace
  static StateDict load(const std::filesystem::path& path);

 private:
  std::map<std::string, Record> records_;
};

}  // namespace fucina::optim
