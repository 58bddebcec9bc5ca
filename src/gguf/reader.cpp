#include "fucina/gguf/reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <limits>

namespace fucina::gguf {

std::string printable(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < 80; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += (c < 0x20 || c >= 0x7f) ? '?' : static_cast<char>(c);
  }
  if (s.size() > 80) out += "...";
  return out;
}

namespace {

using detail::load;

class Cursor {
 public:
  explicit Cursor(Bytes b) : b_(b) {}
  std::uint64_t pos() const { return pos_; }
  std::uint64_t left() const { return b_.size() - pos_; }

  void need(std::uint64_t n, std::string_view what) const {
    FUCINA_CHECK(n <= left(), InvalidFile, "[gguf] truncated file: {} needs {} bytes at byte offset {}, only {} left",
                 what, n, pos_, left());
  }
  template <class T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    const T v = load<T>(b_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }
  std::string_view read_string(std::string_view what) {
    const auto len = read<std::uint64_t>(what);
    need(len, what);
    std::string_view s(reinterpret_cast<const char*>(b_.data() + pos_), static_cast<std::size_t>(len));
    pos_ += len;
    return s;
  }
  Value read_value(ValueType t) {
    const std::uint64_t n = measure_payload(t, b_.subspan(pos_), pos_);
    const Value v = Value::trusted(t, b_.subspan(pos_, n));
    pos_ += n;
    return v;
  }

 private:
  Bytes b_;
  std::uint64_t pos_ = 0;
};

// Smallest possible records, used to reject counts the remaining bytes cannot hold.
constexpr std::uint64_t min_kv_bytes = 8 + 1 + 4 + 1;  // key len, 1-byte key, type, u8 payload
constexpr std::uint64_t min_tensor_info_bytes = 8 + 4 + 4 + 8;  // empty name, n_dims=0, type, offset

void check_version(std::uint32_t v) {
  FUCINA_CHECK((v & 0xFFFF) != 0, InvalidFile,
               "[gguf] version {:#x} looks byte-swapped (big-endian GGUF is not supported) at byte offset 4", v);
  FUCINA_CHECK(v != 1, InvalidFile, "[gguf] GGUF v1 is obsolete and not supported at byte offset 4");
  FUCINA_CHECK(v >= gguf_version_min && v <= gguf_version_max, InvalidFile,
               "[gguf] unsupported version {} (supported: {}..{}) at byte offset 4", v, gguf_version_min,
               gguf_version_max);
}

struct Mapping {
  void* addr = nullptr;
  std::size_t size = 0;
  ~Mapping() {
    if (addr) ::munmap(addr, size);
  }
};

}  // namespace

Reader Reader::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  FUCINA_CHECK(fd >= 0, Io, "[gguf] cannot open '{}': {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    fail(ErrorCode::Io, fmt::format("[gguf] '{}' is not a readable regular file{}", path.string(),
                                    S_ISREG(st.st_mode) ? fmt::format(": {}", std::strerror(err)) : ""));
  }
  auto map = std::make_shared<Mapping>();
  map->size = static_cast<std::size_t>(st.st_size);
  if (map->size > 0) {
    void* p = ::mmap(nullptr, map->size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    if (p == MAP_FAILED) {
      ::close(fd);
      fail(ErrorCode::Io, fmt::format("[gguf] cannot mmap '{}': {}", path.string(), std::strerror(err)));
    }
    map->addr = p;
  }
  ::close(fd);
  Reader r;
  r.bytes_ = Bytes(static_cast<const std::byte*>(map->addr), map->size);
  r.file_size_ = map->size;
  r.owner_ = map;
  r.mapped_ = true;
  try {
    r.parse_all();
  } catch (const Error& e) {  // name the file: the parser only knows byte offsets
    throw Error(e.code(), fmt::format("'{}': {}", path.string(), e.what()));
  }
  return r;
}

void Reader::release_pages(Bytes range) const {
  if (!mapped_ || range.empty()) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(range.data()) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(range.data()) + range.size()) / page * page;
  // Advice only: a failure leaves the pages resident, which is harmless.
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

namespace {

// A part-opened file: its header bytes and one mapping per run of mapped tensors.
struct PartialFile {
  std::vector<std::byte> header;
  std::vector<std::unique_ptr<Mapping>> runs;
};

// The file's first `n` bytes (fewer at its end); Io on a read error.
std::vector<std::byte> read_prefix(int fd, std::uint64_t n, const std::filesystem::path& path) {
  std::vector<std::byte> buf(static_cast<std::size_t>(n));
  std::size_t got = 0;
  while (got < buf.size()) {
    const ssize_t r = ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    FUCINA_CHECK(r >= 0, Io, "[gguf] cannot read '{}': {}", path.string(), std::strerror(errno));
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  buf.resize(got);
  return buf;
}

}  // namespace

Reader Reader::open(const std::filesystem::path& path, const std::function<bool(const TensorInfo&)>& map_tensor) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  FUCINA_CHECK(fd >= 0, Io, "[gguf] cannot open '{}': {}", path.string(), std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  FUCINA_CHECK(::fstat(fd, &st) == 0 && S_ISREG(st.st_mode), Io, "[gguf] '{}' is not a readable regular file",
               path.string());
  const auto size = static_cast<std::uint64_t>(st.st_size);
  auto file = std::make_shared<PartialFile>();
  Reader r;
  r.file_size_ = size;
  r.mapped_ = true;
  r.partial_ = true;
  // The header's length is only known once parsed: read a prefix, twice as long while the
  // parse runs out of bytes (capped: a header is metadata, not weights).
  constexpr std::uint64_t max_header = std::uint64_t{1} << 30;
  for (std::uint64_t want = std::uint64_t{1} << 22;; want *= 2) {
    file->header = read_prefix(fd, std::min({want, size, max_header}), path);
    r.bytes_ = Bytes(file->header.data(), file->header.size());
    r.kvs_.clear(), r.kv_index_.clear(), r.tensors_.clear(), r.tensor_index_.clear();
    try {
      r.parse_all();
      break;
    } catch (const Error& e) {
      if (want >= size || want >= max_header) throw Error(e.code(), fmt::format("'{}': {}", path.string(), e.what()));
    }
  }
  // Runs of consecutive (by offset) accepted tensors, each mapped from its page.
  std::vector<const TensorInfo*> order;
  for (const TensorInfo& t : r.tensors_) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  auto map_run = [&](std::uint64_t begin, std::uint64_t end) {
    const std::uint64_t start = r.data_offset_ + begin, from = start / page * page;
    auto m = std::make_unique<Mapping>();
    m->size = static_cast<std::size_t>(r.data_offset_ + end - from);
    void* p = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(from));
    FUCINA_CHECK(p != MAP_FAILED, Io, "[gguf] cannot mmap '{}': {}", path.string(), std::strerror(errno));
    m->addr = p;
    r.regions_.push_back({begin, Bytes(static_cast<const std::byte*>(p) + (start - from), end - begin)});
    file->runs.push_back(std::move(m));
  };
  std::uint64_t run_begin = 0, run_end = 0;
  bool open_run = false;
  for (const TensorInfo* t : order) {
    if (!map_tensor(*t)) {
      if (open_run) map_run(run_begin, run_end);
      open_run = false;
    } else if (open_run) {
      run_end = std::max(run_end, t->offset + t->size_bytes);
    } else if (t->size_bytes > 0) {
      run_begin = t->offset, run_end = t->offset + t->size_bytes, open_run = true;
    }
  }
  if (open_run) map_run(run_begin, run_end);
  r.owner_ = file;
  return r;
}

Reader Reader::parse(Bytes bytes) {
  Reader r;
  r.bytes_ = bytes;
  r.file_size_ = bytes.size();
  r.parse_all();
  return r;
}

Reader Reader::parse(std::vector<std::byte> bytes) {
  auto owned = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  Reader r;
  r.bytes_ = Bytes(owned->data(), owned->size());
  r.file_size_ = owned->size();
  r.owner_ = owned;
  r.parse_all();
  return r;
}

void Reader::parse_all() {
  Cursor c(bytes_);
  c.need(4, "magic");
  const auto* m = reinterpret_cast<const char*>(bytes_.data());
  FUCINA_CHECK(std::equal(gguf_magic.begin(), gguf_magic.end(), m), InvalidFile,
               "[gguf] bad magic '{}' (expected 'GGUF'; not a GGUF file) at byte offset 0",
               printable(std::string_view(m, 4)));
  c.read<std::uint32_t>("magic");
  version_ = c.read<std::uint32_t>("version");
  check_version(version_);

  const std::uint64_t n_tensors_pos = c.pos();
  const auto n_tensors = c.read<std::uint64_t>("tensor count");
  const std::uint64_t n_kv_pos = c.pos();
  const auto n_kv = c.read<std::uint64_t>("metadata count");
  // Each count must fit in what is left: this also bounds the reserve() calls below.
  FUCINA_CHECK(n_kv <= c.left() / min_kv_bytes, InvalidFile,
               "[gguf] metadata count {} cannot fit in the {} bytes left at byte offset {}", n_kv, c.left(), n_kv_pos);
  FUCINA_CHECK(n_tensors <= c.left() / min_tensor_info_bytes, InvalidFile,
               "[gguf] tensor count {} cannot fit in the {} bytes left at byte offset {}", n_tensors, c.left(),
               n_tensors_pos);

  kvs_.reserve(static_cast<std::size_t>(n_kv));
  kv_index_.reserve(static_cast<std::size_t>(n_kv));
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    const std::uint64_t rec = c.pos();
    const std::string_view key = c.read_string("metadata key");
    FUCINA_CHECK(!key.empty(), InvalidFile, "[gguf] metadata key {} is empty at byte offset {}", i, rec);
    FUCINA_CHECK(kv_index_.emplace(key, kvs_.size()).second, InvalidFile,
                 "[gguf] duplicate metadata key '{}' at byte offset {}", printable(key), rec);
    const std::uint64_t type_pos = c.pos();
    const auto type_id = c.read<std::uint32_t>("metadata value type");
    FUCINA_CHECK(is_valid_value_type(type_id), InvalidFile,
                 "[gguf] metadata key '{}' has unknown value type {} at byte offset {}", printable(key), type_id,
                 type_pos);
    kvs_.push_back({key, c.read_value(static_cast<ValueType>(type_id)), rec});
  }

  if (const KeyValue* kv = find_kv(alignment_key)) {
    FUCINA_CHECK(kv->value.type() == ValueType::Uint32, InvalidFile,
                 "[gguf] {} has type {}, expected u32, at byte offset {}", alignment_key, to_string(kv->value.type()),
                 kv->offset);
    const auto a = kv->value.as<std::uint32_t>();
    FUCINA_CHECK(a != 0 && (a & (a - 1)) == 0, InvalidFile,
                 "[gguf] {} = {} is not a power of two at byte offset {}", alignment_key, a, kv->offset);
    alignment_ = a;
  }

  tensors_.reserve(static_cast<std::size_t>(n_tensors));
  tensor_index_.reserve(static_cast<std::size_t>(n_tensors));
  std::vector<std::uint64_t> offset_field(static_cast<std::size_t>(n_tensors));
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    t.info_offset = c.pos();
    t.name = c.read_string("tensor name");
    const std::string name = printable(t.name);
    FUCINA_CHECK(tensor_index_.emplace(t.name, tensors_.size()).second, InvalidFile,
                 "[gguf] duplicate tensor name '{}' at byte offset {}", name, t.info_offset);
    const std::uint64_t dims_pos = c.pos();
    t.n_dims = c.read<std::uint32_t>("tensor n_dims");
    FUCINA_CHECK(t.n_dims <= max_dims, InvalidFile, "[gguf] tensor '{}' has {} dims (max {}) at byte offset {}",
                 name, t.n_dims, max_dims, dims_pos);
    std::int64_t n_elements = 1;
    for (std::uint32_t d = 0; d < t.n_dims; ++d) {
      const std::uint64_t at = c.pos();
      t.ne[d] = c.read<std::int64_t>("tensor dim");
      FUCINA_CHECK(t.ne[d] >= 0, InvalidFile, "[gguf] tensor '{}' dim {} is negative ({}) at byte offset {}", name, d,
                   t.ne[d], at);
      FUCINA_CHECK(t.ne[d] == 0 || n_elements <= std::numeric_limits<std::int64_t>::max() / t.ne[d], InvalidFile,
                   "[gguf] tensor '{}' element count overflows at dim {} at byte offset {}", name, d, at);
      n_elements *= t.ne[d];
    }
    const std::uint64_t type_pos = c.pos();
    const auto type_id = c.read<std::uint32_t>("tensor type");
    FUCINA_CHECK(is_valid_ggml_type(type_id), InvalidFile,
                 "[gguf] tensor '{}' has unknown ggml type {} at byte offset {}", name, type_id, type_pos);
    t.type = static_cast<GgmlType>(type_id);
    const std::uint64_t blck = block_size(t.type);
    FUCINA_CHECK(t.ne[0] % static_cast<std::int64_t>(blck) == 0, InvalidFile,
                 "[gguf] tensor '{}' row length {} is not a multiple of the {} block size {} at byte offset {}", name,
                 t.ne[0], to_string(t.type), blck, dims_pos);
    const std::uint64_t n_blocks = static_cast<std::uint64_t>(n_elements) / blck;
    FUCINA_CHECK(n_blocks <= std::numeric_limits<std::uint64_t>::max() / type_size(t.type), InvalidFile,
                 "[gguf] tensor '{}' byte size overflows at byte offset {}", name, dims_pos);
    t.size_bytes = n_blocks * type_size(t.type);
    offset_field[static_cast<std::size_t>(i)] = c.pos();
    t.offset = c.read<std::uint64_t>("tensor offset");
    tensors_.push_back(t);
  }

  // The data section starts at the next alignment boundary (ggml pads even a tensor-less
  // file; a tensor-less file may also end right here).
  const std::uint64_t infos_end = c.pos();
  header_end_ = infos_end;
  data_offset_ = (infos_end + alignment_ - 1) / alignment_ * alignment_;
  const std::uint64_t size = file_size_;
  if (n_tensors == 0) return;
  FUCINA_CHECK(data_offset_ <= size, InvalidFile,
               "[gguf] data section would start past the end of the file (size {}) at byte offset {}", size,
               infos_end);
  const std::uint64_t data_size = size - data_offset_;
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const TensorInfo& t = tensors_[i];
    FUCINA_CHECK(t.offset % alignment_ == 0, InvalidFile,
                 "[gguf] tensor '{}' offset {} is misaligned (alignment {}) at byte offset {}", printable(t.name),
                 t.offset, alignment_, offset_field[i]);
    FUCINA_CHECK(t.offset <= data_size && t.size_bytes <= data_size - t.offset, InvalidFile,
                 "[gguf] tensor '{}' data [{}, +{}) runs past the end of the {}-byte data section at byte offset {}",
                 printable(t.name), t.offset, t.size_bytes, data_size, offset_field[i]);
  }
}

const KeyValue* Reader::find_kv(std::string_view key) const {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

const Value* Reader::find(std::string_view key) const {
  const KeyValue* kv = find_kv(key);
  return kv ? &kv->value : nullptr;
}

const Value& Reader::get(std::string_view key) const {
  const Value* v = find(key);
  FUCINA_CHECK(v, InvalidFile, "[gguf] missing metadata key '{}'", printable(key));
  return *v;
}

const Value& Reader::get_typed(std::string_view key, ValueType t) const {
  const Value& v = get(key);
  FUCINA_CHECK(v.type() == t, InvalidFile, "[gguf] metadata key '{}' has type {}, expected {}, at byte offset {}",
               printable(key), to_string(v.type()), to_string(t), find_kv(key)->offset);
  return v;
}

std::string_view Reader::get_string(std::string_view key) const {
  return get_typed(key, ValueType::String).as_string();
}

std::int64_t Reader::get_int(std::string_view key) const {
  const Value& v = get(key);
  FUCINA_CHECK(is_integer(v.type()), InvalidFile,
               "[gguf] metadata key '{}' has type {}, expected an integer, at byte offset {}", printable(key),
               to_string(v.type()), find_kv(key)->offset);
  return v.as_int();
}

double Reader::get_number(std::string_view key) const {
  const Value& v = get(key);
  FUCINA_CHECK(is_integer(v.type()) || v.type() == ValueType::Float32 || v.type() == ValueType::Float64,
               InvalidFile, "[gguf] metadata key '{}' has type {}, expected a number, at byte offset {}",
               printable(key), to_string(v.type()), find_kv(key)->offset);
  return v.as_number();
}

ArrayView Reader::get_array_view(std::string_view key) const {
  return ArrayView(get_typed(key, ValueType::Array));
}

ArrayView Reader::array_checked(std::string_view key, ValueType elem) const {
  const ArrayView a = get_array_view(key);
  FUCINA_CHECK(a.element_type() == elem, InvalidFile,
               "[gguf] metadata key '{}' is an array of {}, expected {}, at byte offset {}", printable(key),
               to_string(a.element_type()), to_string(elem), find_kv(key)->offset);
  return a;
}

std::vector<std::int64_t> Reader::get_int_array(std::string_view key) const {
  const ArrayView a = get_array_view(key);
  FUCINA_CHECK(is_integer(a.element_type()), InvalidFile,
               "[gguf] metadata key '{}' is an array of {}, expected integers, at byte offset {}", printable(key),
               to_string(a.element_type()), find_kv(key)->offset);
  return a.to_int_vector();
}

std::vector<std::string_view> Reader::get_string_array(std::string_view key) const {
  return array_checked(key, ValueType::String).to_string_vector();
}

const TensorInfo* Reader::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& Reader::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  FUCINA_CHECK(t, InvalidFile, "[gguf] missing tensor '{}'", printable(name));
  return *t;
}

Bytes Reader::tensor_data(const TensorInfo& info) const {
  const std::uint64_t data_size = file_size_ >= data_offset_ ? file_size_ - data_offset_ : 0;
  FUCINA_CHECK(info.offset <= data_size && info.size_bytes <= data_size - info.offset, InvalidArgument,
               "[gguf] tensor '{}' is not a tensor of this file", printable(info.name));
  if (partial_) {
    for (const Region& g : regions_)
      if (info.offset >= g.offset && info.offset + info.size_bytes <= g.offset + g.bytes.size())
        return g.bytes.subspan(static_cast<std::size_t>(info.offset - g.offset), static_cast<std::size_t>(info.size_bytes));
    fail(ErrorCode::InvalidArgument, fmt::format("[gguf] tensor '{}' is not mapped (it is read from the file)", printable(info.name)));
  }
  return bytes_.subspan(static_cast<std::size_t>(data_offset_ + info.offset), static_cast<std::size_t>(info.size_bytes));
}

}  // namespace fucina::gguf
