#include "fucina/optim/state.hpp"

#include <fmt/ranges.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <system_error>

#include "fucina/core/atomic_file.hpp"
#include "fucina/core/error.hpp"
#include "fucina/optim/param.hpp"

namespace fucina::optim {

static_assert(std::endian::native == std::endian::little, "the state format is little-endian");

namespace {

constexpr char kMagic[8] = {'F', 'Z', 'O', 'P', 'T', 'S', 'T', '1'};
constexpr int kMaxRank = 8;

std::uint64_t fnv1a(std::span<const std::uint8_t> bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

void put_bytes(std::vector<std::uint8_t>& out, const void* p, std::size_t n) {
  const std::size_t at = out.size();
  out.resize(at + n);
  if (n > 0) std::memcpy(out.data() + at, p, n);
}

template <class T>
void put(std::vector<std::uint8_t>& out, const T& v) {
  put_bytes(out, &v, sizeof(T));
}

class Cursor {
 public:
  explicit Cursor(std::span<const std::uint8_t> b) : b_(b) {}
  template <class T>
  T take() {
    T v;
    std::memcpy(&v, bytes(sizeof(T)), sizeof(T));
    return v;
  }
  const std::uint8_t* bytes(std::size_t n) {
    FUCINA_CHECK(n <= b_.size() - pos_, InvalidFile, "[StateDict] truncated: need {} bytes at offset {}, {} left", n, pos_,
                 b_.size() - pos_);
    const std::uint8_t* p = b_.data() + pos_;
    pos_ += n;
    return p;
  }
  std::size_t pos() const { return pos_; }
  std::size_t left() const { return b_.size() - pos_; }

 private:
  std::span<const std::uint8_t> b_;
  std::size_t pos_ = 0;
};

std::size_t elem_size(RecordType t) { return t == RecordType::f32 ? 4 : 8; }

const Record& typed(const StateDict& d, const std::string& name, RecordType t) {
  const Record* r = d.find(name);
  FUCINA_CHECK(r != nullptr, InvalidFile, "[StateDict] missing record '{}'", name);
  FUCINA_CHECK(r->type == t, InvalidFile, "[StateDict] record '{}' has dtype {}, expected {}", name,
               static_cast<int>(r->type), static_cast<int>(t));
  return *r;
}

}  // namespace

void StateDict::put_f32(const std::string& name, std::span<const std::int64_t> shape, std::span<const float> data) {
  FUCINA_CHECK(shape.size() <= kMaxRank, InvalidShape, "[StateDict] record '{}' has rank {} > 8", name, shape.size());
  FUCINA_CHECK(shape_numel(shape) == static_cast<std::int64_t>(data.size()), ShapeMismatch,
               "[StateDict] record '{}': shape holds {} elements, data has {}", name, shape_numel(shape), data.size());
  Record r;
  r.type = RecordType::f32;
  r.shape.assign(shape.begin(), shape.end());
  r.f32.assign(data.begin(), data.end());
  records_[name] = std::move(r);
}

void StateDict::put_i64(const std::string& name, std::int64_t value) {
  Record r;
  r.type = RecordType::i64;
  r.i64 = {value};
  records_[name] = std::move(r);
}

void StateDict::put_i64s(const std::string& name, std::span<const std::int64_t> values) {
  Record r;
  r.type = RecordType::i64;
  r.shape = {static_cast<std::int64_t>(values.size())};
  r.i64.assign(values.begin(), values.end());
  records_[name] = std::move(r);
}

void StateDict::put_f64(const std::string& name, double value) {
  Record r;
  r.type = RecordType::f64;
  r.f64 = {value};
  records_[name] = std::move(r);
}

const Record* StateDict::find(const std::string& name) const {
  auto it = records_.find(name);
  return it == records_.end() ? nullptr : &it->second;
}

std::span<const float> StateDict::get_f32(const std::string& name, std::span<const std::int64_t> shape) const {
  const Record& r = typed(*this, name, RecordType::f32);
  FUCINA_CHECK(std::equal(r.shape.begin(), r.shape.end(), shape.begin(), shape.end()), InvalidFile,
               "[StateDict] record '{}' has shape [{}], expected [{}]", name, fmt::join(r.shape, ", "),
               fmt::join(shape, ", "));
  return r.f32;
}

std::int64_t StateDict::get_i64(const std::string& name) const {
  const Record& r = typed(*this, name, RecordType::i64);
  FUCINA_CHECK(r.shape.empty(), InvalidFile, "[StateDict] record '{}' is not a scalar", name);
  return r.i64[0];
}

std::span<const std::int64_t> StateDict::get_i64s(const std::string& name) const {
  const Record& r = typed(*this, name, RecordType::i64);
  FUCINA_CHECK(r.shape.size() == 1, InvalidFile, "[StateDict] record '{}' is not a 1-D array", name);
  return r.i64;
}

double StateDict::get_f64(const std::string& name) const {
  const Record& r = typed(*this, name, RecordType::f64);
  FUCINA_CHECK(r.shape.empty(), InvalidFile, "[StateDict] record '{}' is not a scalar", name);
  return r.f64[0];
}

std::vector<std::uint8_t> StateDict::to_bytes() const {
  std::vector<std::uint8_t> out;
  put_bytes(out, kMagic, sizeof(kMagic));
  put(out, static_cast<std::uint64_t>(records_.size()));
  for (const auto& [name, r] : records_) {
    put(out, static_cast<std::uint32_t>(name.size()));
    put_bytes(out, name.data(), name.size());
    put(out, static_cast<std::uint8_t>(r.type));
    put(out, static_cast<std::uint8_t>(r.shape.size()));
    for (std::int64_t d : r.shape) put(out, d);
    const auto* data = r.type == RecordType::f32   ? reinterpret_cast<const std::uint8_t*>(r.f32.data())
                       : r.type == RecordType::i64 ? reinterpret_cast<const std::uint8_t*>(r.i64.data())
                                                   : reinterpret_cast<const std::uint8_t*>(r.f64.data());
    const std::size_t n = static_cast<std::size_t>(shape_numel(r.shape)) * elem_size(r.type);
    put_bytes(out, data, n);
  }
  put(out, fnv1a(out));
  return out;
}

StateDict StateDict::from_bytes(std::span<const std::uint8_t> bytes) {
  FUCINA_CHECK(bytes.size() >= 24, InvalidFile, "[StateDict] {} bytes is too short for a state file", bytes.size());
  FUCINA_CHECK(std::memcmp(bytes.data(), kMagic, 8) == 0, InvalidFile, "[StateDict] bad magic (not a Fucina state file)");
  std::uint64_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  const auto body = bytes.first(bytes.size() - 8);
  FUCINA_CHECK(fnv1a(body) == stored, InvalidFile, "[StateDict] checksum mismatch (truncated or corrupt file)");
  Cursor c(body);
  c.bytes(8);
  const auto count = c.take<std::uint64_t>();
  StateDict d;
  for (std::uint64_t i = 0; i < count; ++i) {
    const auto len = c.take<std::uint32_t>();
    const auto* nb = c.bytes(len);
    std::string name(reinterpret_cast<const char*>(nb), len);
    const auto type = c.take<std::uint8_t>();
    FUCINA_CHECK(type <= 2, InvalidFile, "[StateDict] record '{}' has unknown dtype {}", name, type);
    const auto rank = c.take<std::uint8_t>();
    FUCINA_CHECK(rank <= kMaxRank, InvalidFile, "[StateDict] record '{}' has rank {} > 8", name, rank);
    Record r;
    r.type = static_cast<RecordType>(type);
    std::int64_t numel = 1;
    for (int k = 0; k < rank; ++k) {
      const auto dim = c.take<std::int64_t>();
      FUCINA_CHECK(dim >= 0, InvalidFile, "[StateDict] record '{}' has negative dim {}", name, dim);
      FUCINA_CHECK(dim == 0 || numel <= static_cast<std::int64_t>(c.left()) / dim, InvalidFile,
                   "[StateDict] record '{}' is larger than the file", name);
      numel *= dim;
      r.shape.push_back(dim);
    }
    FUCINA_CHECK(numel <= static_cast<std::int64_t>(c.left() / elem_size(r.type)), InvalidFile,
                 "[StateDict] record '{}' is larger than the file", name);
    const auto* data = c.bytes(static_cast<std::size_t>(numel) * elem_size(r.type));
    const auto n = static_cast<std::size_t>(numel);
    if (r.type == RecordType::f32) r.f32.resize(n), std::memcpy(r.f32.data(), data, n * 4);
    else if (r.type == RecordType::i64) r.i64.resize(n), std::memcpy(r.i64.data(), data, n * 8);
    else r.f64.resize(n), std::memcpy(r.f64.data(), data, n * 8);
    FUCINA_CHECK(d.records_.emplace(std::move(name), std::move(r)).second, InvalidFile,
                 "[StateDict] duplicate record name");
  }
  FUCINA_CHECK(c.left() == 0, InvalidFile, "[StateDict] {} unexpected trailing bytes", c.left());
  return d;
}

void StateDict::save(const std::filesystem::path& path) const {
  const auto bytes = to_bytes();
  write_file_atomic(path, std::as_bytes(std::span(bytes)));
}

StateDict StateDict::load(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  FUCINA_CHECK(f.good(), Io, "[StateDict] cannot open '{}'", path.string());
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  FUCINA_CHECK(!f.bad(), Io, "[StateDict] read of '{}' failed", path.string());
  return from_bytes(bytes);
}

}  // namespace fucina::optim
