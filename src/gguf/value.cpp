#include "fucina/gguf/value.hpp"

#include <fmt/format.h>

#include <limits>

namespace fucina::gguf {

namespace detail {

void expect_type(ValueType actual, ValueType expected, std::string_view what) {
  FUCINA_CHECK(actual == expected, InvalidFile, "[gguf] {} has type {}, expected {}", what, to_string(actual),
               to_string(expected));
}

}  // namespace detail

namespace {

using detail::load;

// Remaining-bytes guard shared by every read of measure_payload.
struct Span {
  Bytes b;
  std::uint64_t base;  // file offset of b[0]

  std::uint64_t left(std::uint64_t pos) const { return b.size() - pos; }
  void need(std::uint64_t pos, std::uint64_t n, std::string_view what) const {
    FUCINA_CHECK(n <= left(pos), InvalidFile, "[gguf] truncated {}: needs {} bytes at byte offset {}, only {} left",
                 what, n, base + pos, left(pos));
  }
  void count_fits(std::uint64_t pos, std::uint64_t count, std::uint64_t min_elem, std::string_view what) const {
    FUCINA_CHECK(count <= left(pos) / min_elem, InvalidFile,
                 "[gguf] {} count {} cannot fit in the {} bytes left at byte offset {}", what, count, left(pos),
                 base + pos);
  }
};

std::uint64_t measure_array(const Span& s, std::uint32_t depth) {
  s.need(0, 12, "array header");
  const auto elem_id = load<std::uint32_t>(s.b.data());
  const auto count = load<std::uint64_t>(s.b.data() + 4);
  FUCINA_CHECK(is_valid_value_type(elem_id), InvalidFile, "[gguf] unknown array element type {} at byte offset {}",
               elem_id, s.base);
  const auto elem = static_cast<ValueType>(elem_id);
  std::uint64_t pos = 12;
  if (const std::uint32_t size = value_type_size(elem); size != 0) {
    s.count_fits(pos, count, size, "array element");
    return pos + count * size;
  }
  if (elem == ValueType::String) {
    s.count_fits(pos, count, 8, "string array element");
    for (std::uint64_t i = 0; i < count; ++i) {
      s.need(pos, 8, "string length");
      const auto len = load<std::uint64_t>(s.b.data() + pos);
      s.need(pos + 8, len, "string");
      pos += 8 + len;
    }
    return pos;
  }
  FUCINA_CHECK(depth + 1 < max_array_depth, InvalidFile, "[gguf] arrays nested deeper than {} at byte offset {}",
               max_array_depth, s.base);
  s.count_fits(pos, count, 12, "nested array element");
  for (std::uint64_t i = 0; i < count; ++i)
    pos += measure_payload(ValueType::Array, s.b.subspan(pos), s.base + pos, depth + 1);
  return pos;
}

void append_escaped(std::string& out, std::string_view s, std::size_t max_bytes) {
  std::size_t cut = s.size() <= max_bytes ? s.size() : max_bytes;
  // Do not split a UTF-8 sequence: back up over continuation bytes.
  while (cut < s.size() && cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  out += '"';
  for (std::size_t i = 0; i < cut; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c < 0x20 || c == 0x7f)
          out += fmt::format("\\x{:02x}", c);
        else
          out += static_cast<char>(c);
    }
  }
  out += '"';
  if (cut < s.size()) out += fmt::format("... ({} bytes)", s.size());
}

void append_value(std::string& out, const Value& v, std::size_t max_items, std::size_t max_string) {
  switch (v.type()) {
    case ValueType::Float32: out += fmt::format("{}", v.as<float>()); return;
    case ValueType::Float64: out += fmt::format("{}", v.as<double>()); return;
    case ValueType::Bool: out += v.as<bool>() ? "true" : "false"; return;
    case ValueType::Uint64: out += fmt::format("{}", v.as<std::uint64_t>()); return;
    case ValueType::String: append_escaped(out, v.as_string(), max_string); return;
    case ValueType::Array: {
      const ArrayView a = v.as_array();
      out += '[';
      std::uint64_t i = 0;
      for (auto it = a.begin(); it != a.end() && i < max_items; ++it, ++i) {
        if (i) out += ", ";
        append_value(out, *it, max_items, max_string);
      }
      if (a.size() > max_items) out += fmt::format(", ... ({} items)", a.size());
      out += ']';
      return;
    }
    default: out += fmt::format("{}", v.as_int()); return;
  }
}

}  // namespace

std::uint64_t measure_payload(ValueType t, Bytes bytes, std::uint64_t file_offset, std::uint32_t depth) {
  const Span s{bytes, file_offset};
  FUCINA_CHECK(is_valid_value_type(static_cast<std::uint32_t>(t)), InvalidFile,
               "[gguf] unknown value type {} at byte offset {}", static_cast<std::uint32_t>(t), file_offset);
  if (const std::uint32_t size = value_type_size(t); size != 0) {
    s.need(0, size, to_string(t));
    return size;
  }
  if (t == ValueType::String) {
    s.need(0, 8, "string length");
    const auto len = load<std::uint64_t>(bytes.data());
    s.need(8, len, "string");
    return 8 + len;
  }
  return measure_array(s, depth);
}

std::string_view Value::as_string() const {
  expect(ValueType::String);
  const auto len = load<std::uint64_t>(payload_.data());
  return {reinterpret_cast<const char*>(payload_.data() + 8), static_cast<std::size_t>(len)};
}

ArrayView Value::as_array() const { return ArrayView(*this); }

std::int64_t Value::as_int() const {
  switch (type_) {
    case ValueType::Uint8: return load<std::uint8_t>(payload_.data());
    case ValueType::Int8: return load<std::int8_t>(payload_.data());
    case ValueType::Uint16: return load<std::uint16_t>(payload_.data());
    case ValueType::Int16: return load<std::int16_t>(payload_.data());
    case ValueType::Uint32: return load<std::uint32_t>(payload_.data());
    case ValueType::Int32: return load<std::int32_t>(payload_.data());
    case ValueType::Int64: return load<std::int64_t>(payload_.data());
    case ValueType::Uint64: {
      const auto v = load<std::uint64_t>(payload_.data());
      FUCINA_CHECK(v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), InvalidFile,
                   "[gguf] u64 value {} does not fit in i64", v);
      return static_cast<std::int64_t>(v);
    }
    default:
      fail(ErrorCode::InvalidFile, fmt::format("[gguf] value has type {}, expected an integer", to_string(type_)));
  }
}

double Value::as_number() const {
  if (type_ == ValueType::Float32) return load<float>(payload_.data());
  if (type_ == ValueType::Float64) return load<double>(payload_.data());
  if (type_ == ValueType::Uint64) return static_cast<double>(load<std::uint64_t>(payload_.data()));
  FUCINA_CHECK(is_integer(type_), InvalidFile, "[gguf] value has type {}, expected a number", to_string(type_));
  return static_cast<double>(as_int());
}

ArrayView::ArrayView(const Value& v) {
  v.expect(ValueType::Array);
  const Bytes p = v.payload();
  elem_ = static_cast<ValueType>(load<std::uint32_t>(p.data()));
  size_ = load<std::uint64_t>(p.data() + 4);
  elems_ = p.subspan(12);
}

std::vector<std::int64_t> ArrayView::to_int_vector() const {
  FUCINA_CHECK(is_integer(elem_), InvalidFile, "[gguf] array element has type {}, expected an integer",
               to_string(elem_));
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(size_));
  for (const Value& v : *this) out.push_back(v.as_int());
  return out;
}

std::vector<std::string_view> ArrayView::to_string_vector() const {
  detail::expect_type(elem_, ValueType::String, "array element");
  std::vector<std::string_view> out;
  out.reserve(static_cast<std::size_t>(size_));
  for (const Value& v : *this) out.push_back(v.as_string());
  return out;
}

std::uint64_t ArrayView::Iterator::element_size() const {
  const Bytes at = elems_.subspan(pos_);
  if (const std::uint32_t size = value_type_size(elem_); size != 0) return size;
  if (elem_ == ValueType::String) return 8 + load<std::uint64_t>(at.data());
  return measure_payload(ValueType::Array, at, 0);
}

Value ArrayView::Iterator::operator*() const {
  return Value::trusted(elem_, elems_.subspan(pos_, element_size()));
}

ArrayView::Iterator& ArrayView::Iterator::operator++() {
  pos_ += element_size();
  ++index_;
  return *this;
}

OwnedValue OwnedValue::string(std::string_view s) {
  OwnedValue o(ValueType::String);
  o.append_string(s);
  return o;
}

OwnedValue OwnedValue::string_array(std::span<const std::string_view> items) {
  OwnedValue o(ValueType::Array);
  o.append_array_header(ValueType::String, items.size());
  for (std::string_view s : items) o.append_string(s);
  return o;
}

OwnedValue OwnedValue::string_array(std::span<const std::string> items) {
  OwnedValue o(ValueType::Array);
  o.append_array_header(ValueType::String, items.size());
  for (const std::string& s : items) o.append_string(s);
  return o;
}

OwnedValue OwnedValue::array_of(ValueType element_type, std::span<const OwnedValue> items) {
  FUCINA_CHECK(is_valid_value_type(static_cast<std::uint32_t>(element_type)), InvalidArgument,
               "[gguf] unknown array element type {}", static_cast<std::uint32_t>(element_type));
  OwnedValue o(ValueType::Array);
  o.append_array_header(element_type, items.size());
  for (const OwnedValue& item : items) {
    FUCINA_CHECK(item.type() == element_type, InvalidArgument, "[gguf] array_of({}) got an item of type {}",
                 to_string(element_type), to_string(item.type()));
    detail::append_bytes(o.payload_, item.payload_.data(), item.payload_.size());
  }
  return o;
}

OwnedValue OwnedValue::copy(const Value& v) {
  OwnedValue o(v.type());
  detail::append_bytes(o.payload_, v.payload().data(), v.payload().size());
  return o;
}

void OwnedValue::append_string(std::string_view s) {
  append_scalar<std::uint64_t>(s.size());
  detail::append_bytes(payload_, s.data(), s.size());
}

void OwnedValue::append_array_header(ValueType elem, std::uint64_t n) {
  append_scalar(static_cast<std::uint32_t>(elem));
  append_scalar(n);
}

std::string format_value(const Value& v, std::size_t max_items, std::size_t max_string) {
  std::string out;
  append_value(out, v, max_items, max_string);
  return out;
}

}  // namespace fucina::gguf
