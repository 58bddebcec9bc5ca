#include "fucina/gguf/writer.hpp"

#include <fmt/format.h>

#include <limits>

namespace fucina::gguf {

namespace {

std::uint64_t align_up(std::uint64_t n, std::uint64_t a) { return (n + a - 1) / a * a; }

template <class T>
void put(std::vector<std::byte>& out, T v) {
  detail::append_bytes(out, &v, sizeof(T));
}

void put_string(std::vector<std::byte>& out, std::string_view s) {
  put<std::uint64_t>(out, s.size());
  detail::append_bytes(out, s.data(), s.size());
}

}  // namespace

Writer Writer::from_reader(const Reader& r) {
  Writer w;
  w.set_version(r.version());
  for (const KeyValue& kv : r.metadata()) w.set(kv.key, kv.value);
  for (const TensorInfo& t : r.tensors()) w.add_tensor(t, r.tensor_data(t));
  if (r.tensors().empty()) w.set_pad_tensorless(r.bytes().size() > r.header_end());
  return w;
}

void Writer::set_version(std::uint32_t version) {
  FUCINA_CHECK(version >= gguf_version_min && version <= gguf_version_max, InvalidArgument,
               "[gguf] cannot write version {} (supported: {}..{})", version, gguf_version_min, gguf_version_max);
  version_ = version;
}

void Writer::set(std::string_view key, OwnedValue value) {
  FUCINA_CHECK(!key.empty(), InvalidArgument, "[gguf] metadata keys must not be empty");
  if (key == alignment_key) {
    FUCINA_CHECK(value.type() == ValueType::Uint32, InvalidArgument, "[gguf] {} must be u32, got {}", alignment_key,
                 to_string(value.type()));
    const auto a = value.view().as<std::uint32_t>();
    FUCINA_CHECK(a != 0 && (a & (a - 1)) == 0, InvalidArgument, "[gguf] {} = {} is not a power of two",
                 alignment_key, a);
    alignment_ = a;
  }
  const std::string k(key);
  if (const auto it = kv_index_.find(k); it != kv_index_.end()) {
    kvs_[it->second].second = std::move(value);
    return;
  }
  kv_index_.emplace(k, kvs_.size());
  kvs_.emplace_back(k, std::move(value));
}

bool Writer::erase(std::string_view key) {
  const auto it = kv_index_.find(std::string(key));
  if (it == kv_index_.end()) return false;
  const std::size_t index = it->second;
  kv_index_.erase(it);
  kvs_.erase(kvs_.begin() + static_cast<std::ptrdiff_t>(index));
  for (auto& [k, i] : kv_index_)
    if (i > index) --i;
  if (key == alignment_key) alignment_ = default_alignment;
  return true;
}

const OwnedValue* Writer::find(std::string_view key) const {
  const auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].second;
}

void Writer::set_tensor_data(std::string_view name, Bytes data) {
  const auto it = tensor_index_.find(std::string(name));
  FUCINA_CHECK(it != tensor_index_.end(), InvalidArgument, "[gguf] no tensor '{}' to replace", name);
  Tensor& t = tensors_[it->second];
  FUCINA_CHECK(data.size() == t.size_bytes, InvalidArgument, "[gguf] tensor '{}' takes {} bytes, got {}", name,
               t.size_bytes, data.size());
  t.data = data;
}

std::size_t Writer::add_tensor(std::string_view name, GgmlType type, std::span<const std::int64_t> ne, Bytes data) {
  const auto type_id = static_cast<std::uint32_t>(type);
  FUCINA_CHECK(is_valid_ggml_type(type_id), InvalidArgument, "[gguf] tensor '{}': unknown ggml type {}", name,
               type_id);
  FUCINA_CHECK(ne.size() <= max_dims, InvalidArgument, "[gguf] tensor '{}' has {} dims (max {})", name, ne.size(),
               max_dims);
  FUCINA_CHECK(!tensor_index_.contains(std::string(name)), InvalidArgument, "[gguf] duplicate tensor name '{}'",
               name);
  Tensor t;
  t.name = std::string(name);
  t.type = type;
  t.n_dims = static_cast<std::uint32_t>(ne.size());
  std::int64_t n = 1;
  for (std::size_t d = 0; d < ne.size(); ++d) {
    FUCINA_CHECK(ne[d] >= 0, InvalidArgument, "[gguf] tensor '{}' dim {} is negative ({})", name, d, ne[d]);
    FUCINA_CHECK(ne[d] == 0 || n <= std::numeric_limits<std::int64_t>::max() / ne[d], InvalidArgument,
                 "[gguf] tensor '{}' element count overflows", name);
    n *= ne[d];
    t.ne[d] = ne[d];
  }
  FUCINA_CHECK(t.ne[0] % block_size(type) == 0, InvalidArgument,
               "[gguf] tensor '{}' row length {} is not a multiple of the {} block size {}", name, t.ne[0],
               to_string(type), block_size(type));
  const std::uint64_t blocks = static_cast<std::uint64_t>(n) / block_size(type);
  FUCINA_CHECK(blocks <= std::numeric_limits<std::uint64_t>::max() / 2 / type_size(type), InvalidArgument,
               "[gguf] tensor '{}' byte size overflows", name);
  t.size_bytes = blocks * type_size(type);
  FUCINA_CHECK(data.empty() || data.size() == t.size_bytes, InvalidArgument,
               "[gguf] tensor '{}' needs {} bytes of data, got {}", name, t.size_bytes, data.size());
  t.data = data;
  tensor_index_.emplace(t.name, tensors_.size());
  tensors_.push_back(std::move(t));
  return tensors_.size() - 1;
}

std::uint64_t Writer::tensor_offset(std::size_t index) const {
  FUCINA_CHECK(index < tensors_.size(), IndexOutOfBounds, "[gguf] tensor index {} of {}", index, tensors_.size());
  std::uint64_t off = 0;
  for (std::size_t i = 0; i < index; ++i) off += align_up(tensors_[i].size_bytes, alignment_);
  return off;
}

std::uint64_t Writer::header_size() const {
  std::uint64_t n = 4 + 4 + 8 + 8;
  for (const auto& [key, value] : kvs_) n += 8 + key.size() + 4 + value.payload().size();
  for (const Tensor& t : tensors_) n += 8 + t.name.size() + 4 + 8 * t.n_dims + 4 + 8;
  return tensors_.empty() && !pad_tensorless_ ? n : align_up(n, alignment_);
}

std::uint64_t Writer::total_size() const {
  std::uint64_t n = header_size();
  for (const Tensor& t : tensors_) n += align_up(t.size_bytes, alignment_);
  return n;
}

std::vector<std::byte> Writer::header_bytes() const {
  std::vector<std::byte> out;
  out.reserve(static_cast<std::size_t>(header_size()));
  detail::append_bytes(out, gguf_magic.data(), gguf_magic.size());
  put<std::uint32_t>(out, version_);
  put<std::uint64_t>(out, tensors_.size());
  put<std::uint64_t>(out, kvs_.size());
  for (const auto& [key, value] : kvs_) {
    put_string(out, key);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(value.type()));
    detail::append_bytes(out, value.payload().data(), value.payload().size());
  }
  std::uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<std::uint32_t>(out, t.n_dims);
    for (std::uint32_t d = 0; d < t.n_dims; ++d) put<std::int64_t>(out, t.ne[d]);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(t.type));
    put<std::uint64_t>(out, offset);
    offset += align_up(t.size_bytes, alignment_);
  }
  out.resize(static_cast<std::size_t>(header_size()), std::byte{0});
  return out;
}

std::vector<std::byte> Writer::to_bytes() const {
  std::vector<std::byte> out;
  out.reserve(static_cast<std::size_t>(total_size()));
  StreamWriter s(*this, [&out](Bytes b) { detail::append_bytes(out, b.data(), b.size()); });
  for (const Tensor& t : tensors_) s.write_tensor(t.data);
  s.finish();
  return out;
}

void Writer::write_file(const std::filesystem::path& path) const {
  StreamWriter s(*this, path);
  for (const Tensor& t : tensors_) s.write_tensor(t.data);
  s.finish();
}

StreamWriter::StreamWriter(const Writer& layout, ByteSink sink) : alignment_(layout.alignment()), sink_(std::move(sink)) {
  start(layout);
}

StreamWriter::StreamWriter(const Writer& layout, const std::filesystem::path& path,
                           std::span<const std::filesystem::path> inputs)
    : alignment_(layout.alignment()), file_(std::make_unique<AtomicFile>(path, inputs)) {
  start(layout);
}

StreamWriter::~StreamWriter() = default;

void StreamWriter::start(const Writer& layout) {
  tensors_.reserve(layout.tensors().size());
  for (const Writer::Tensor& t : layout.tensors()) tensors_.push_back({t.name, t.size_bytes});
  emit(layout.header_bytes());
}

void StreamWriter::emit(Bytes b) {
  if (b.empty()) return;
  if (file_) {
    file_->write(b);
  } else if (sink_) {
    sink_(b);
  }
  written_ += b.size();
}

void StreamWriter::pad() {
  static constexpr std::array<std::byte, 256> zeros{};
  std::uint64_t n = align_up(written_, alignment_) - written_;
  while (n > 0) {
    const std::uint64_t k = n < zeros.size() ? n : zeros.size();
    emit(Bytes(zeros.data(), static_cast<std::size_t>(k)));
    n -= k;
  }
}

void StreamWriter::next_tensor() {
  pad();
  ++current_;
  in_tensor_ = 0;
}

// Zero-size tensors need no bytes: passed over when data for a later tensor arrives.
void StreamWriter::skip_empty_tensors() {
  while (current_ < tensors_.size() && tensors_[current_].size == 0) next_tensor();
}

void StreamWriter::write(Bytes chunk) {
  FUCINA_CHECK(!finished_, InvalidArgument, "[gguf] write after finish()");
  if (chunk.empty()) return;
  if (in_tensor_ == 0) skip_empty_tensors();
  FUCINA_CHECK(current_ < tensors_.size(), InvalidArgument, "[gguf] {} bytes written past the last tensor",
               chunk.size());
  const Entry& t = tensors_[current_];
  FUCINA_CHECK(chunk.size() <= t.size - in_tensor_, InvalidArgument,
               "[gguf] tensor '{}' has {} bytes left, got a {}-byte chunk", t.name, t.size - in_tensor_, chunk.size());
  emit(chunk);
  in_tensor_ += chunk.size();
  if (in_tensor_ == t.size) next_tensor();
}

void StreamWriter::write_tensor(Bytes data) {
  FUCINA_CHECK(current_ < tensors_.size(), InvalidArgument, "[gguf] write_tensor past the last tensor");
  if (data.empty() && in_tensor_ == 0 && tensors_[current_].size == 0) {
    next_tensor();
    return;
  }
  if (in_tensor_ == 0) skip_empty_tensors();
  FUCINA_CHECK(current_ < tensors_.size(), InvalidArgument, "[gguf] write_tensor past the last tensor");
  const Entry& t = tensors_[current_];
  FUCINA_CHECK(in_tensor_ == 0 && data.size() == t.size, InvalidArgument,
               "[gguf] tensor '{}' needs {} bytes, write_tensor got {}", t.name, t.size, data.size());
  write(data);
}

void StreamWriter::finish() {
  if (in_tensor_ == 0) skip_empty_tensors();
  FUCINA_CHECK(current_ == tensors_.size(), InvalidArgument,
               "[gguf] finish() with tensor '{}' ({} of {}) incomplete: {} of {} bytes written", tensors_[current_].name,
               current_, tensors_.size(), in_tensor_, tensors_[current_].size);
  finished_ = true;
  if (file_) file_->commit();
}

}  // namespace fucina::gguf
