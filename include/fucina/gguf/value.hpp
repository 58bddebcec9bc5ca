#pragma once
// GGUF metadata values: Value (a zero-copy view of a validated wire payload), ArrayView
// (its array form) and OwnedValue (an encoded payload the Writer owns).
//
// Note [Payload views]
// A value is kept as its type plus its wire payload (the bytes after the type tag, see
// Note [GGUF layout]), not decoded into a variant: re-emitting copies the payload byte for
// byte, strings and arrays stay zero-copy, and a 150k-entry vocab costs no allocation until
// someone asks for it. Views are only made from payloads that measure_payload() accepted, so
// accessors trust the bytes; a type mismatch still throws InvalidFile with both type names.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fucina/core/error.hpp"
#include "fucina/gguf/format.hpp"

namespace fucina::gguf {

static_assert(std::endian::native == std::endian::little, "GGUF is read in place: little-endian hosts only");

using Bytes = std::span<const std::byte>;

inline constexpr std::uint32_t max_array_depth = 8;  // arrays of arrays nest at most this deep

// Size of the payload of type `t` at the start of `bytes`. Throws InvalidFile naming the
// problem and the byte offset (`file_offset` is where `bytes` starts in the file) when it is
// truncated, has an unknown element type, or nests deeper than max_array_depth. Never reads
// outside `bytes` and never allocates.
std::uint64_t measure_payload(ValueType t, Bytes bytes, std::uint64_t file_offset, std::uint32_t depth = 0);

namespace detail {
// Throws InvalidFile "<what> has type X, expected Y" unless actual == expected.
void expect_type(ValueType actual, ValueType expected, std::string_view what);

// resize+memcpy rather than vector::insert: GCC 12 reports false -Wstringop-overflow there.
inline void append_bytes(std::vector<std::byte>& out, const void* p, std::size_t n) {
  if (n == 0) return;
  const std::size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
}  // namespace detail

class ArrayView;

class Value {
 public:
  Value() = default;
  ValueType type() const { return type_; }
  Bytes payload() const { return payload_; }

  // Exact type match: as<std::uint32_t>() on a Uint32 value.
  template <ScalarValue T>
  T as() const {
    expect(value_type_of<T>);
    if constexpr (std::is_same_v<T, bool>)
      return payload_[0] != std::byte{0};
    else
      return detail::load<T>(payload_.data());
  }
  std::string_view as_string() const;
  ArrayView as_array() const;
  // Any integer type, widened; a Uint64 above INT64_MAX throws.
  std::int64_t as_int() const;
  // Any integer or floating type, converted to double.
  double as_number() const;

  // Throws InvalidFile "value has type X, expected Y" unless type() == t.
  void expect(ValueType t) const { detail::expect_type(type_, t, "value"); }

  // Precondition: `payload` was accepted by measure_payload(t, ...) and has exactly that size.
  static Value trusted(ValueType t, Bytes payload) { return Value(t, payload); }

 private:
  Value(ValueType t, Bytes payload) : type_(t), payload_(payload) {}
  ValueType type_ = ValueType::Uint8;
  Bytes payload_;
};

// An array payload: element type, count, and the elements back to back.
class ArrayView {
 public:
  explicit ArrayView(const Value& v);
  ValueType element_type() const { return elem_; }
  std::uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Bytes elements() const { return elems_; }  // the elements' payloads, back to back

  // Copies the elements; the element type must be exactly T.
  template <ScalarValue T>
  std::vector<T> to_vector() const {
    detail::expect_type(elem_, value_type_of<T>, "array element");
    std::vector<T> out(static_cast<std::size_t>(size_));
    for (std::size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>)
        out[i] = elems_[i] != std::byte{0};
      else
        out[i] = detail::load<T>(elems_.data() + i * sizeof(T));
    }
    return out;
  }
  // Any integer element type, widened (Uint64 above INT64_MAX throws).
  std::vector<std::int64_t> to_int_vector() const;
  // Element type must be String; the views point into the payload.
  std::vector<std::string_view> to_string_vector() const;

  // Forward iteration over the elements as Values (strings and nested arrays are walked).
  class Iterator {
   public:
    using value_type = Value;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    Value operator*() const;
    Iterator& operator++();
    Iterator operator++(int) {
      Iterator t = *this;
      ++*this;
      return t;
    }
    bool operator==(const Iterator& o) const { return index_ == o.index_; }

   private:
    friend class ArrayView;
    Iterator(ValueType elem, Bytes elems, std::uint64_t index, std::uint64_t pos)
        : elem_(elem), elems_(elems), index_(index), pos_(pos) {}
    std::uint64_t element_size() const;
    ValueType elem_ = ValueType::Uint8;
    Bytes elems_;  // self-contained: an iterator may outlive the ArrayView it came from
    std::uint64_t index_ = 0;
    std::uint64_t pos_ = 0;  // byte position of element index_ inside elems_
  };
  Iterator begin() const { return Iterator(elem_, elems_, 0, 0); }
  Iterator end() const { return Iterator(elem_, elems_, size_, elems_.size()); }

 private:
  ValueType elem_;
  std::uint64_t size_;
  Bytes elems_;
};

// An encoded value the Writer owns. Built from C++ values or copied from a Value.
class OwnedValue {
 public:
  template <ScalarValue T>
  static OwnedValue scalar(T v) {
    OwnedValue o(value_type_of<T>);
    o.append_scalar(v);
    return o;
  }
  static OwnedValue string(std::string_view s);
  template <ScalarValue T>
  static OwnedValue array(std::span<const T> items) {
    OwnedValue o(ValueType::Array);
    o.append_array_header(value_type_of<T>, items.size());
    for (const T& v : items) o.append_scalar(v);
    return o;
  }
  static OwnedValue string_array(std::span<const std::string_view> items);
  static OwnedValue string_array(std::span<const std::string> items);
  // An array whose elements are `items`, each of type `element_type` (Array for nesting;
  // the explicit type also makes an empty array's element type known).
  static OwnedValue array_of(ValueType element_type, std::span<const OwnedValue> items);
  // Byte-verbatim copy of a value read from a file.
  static OwnedValue copy(const Value& v);

  ValueType type() const { return type_; }
  Bytes payload() const { return payload_; }
  Value view() const { return Value::trusted(type_, payload_); }

 private:
  explicit OwnedValue(ValueType t) : type_(t) {}
  template <class T>
  void append_scalar(T v) {
    if constexpr (std::is_same_v<T, bool>) {
      payload_.push_back(v ? std::byte{1} : std::byte{0});
    } else {
      detail::append_bytes(payload_, &v, sizeof(T));
    }
  }
  void append_string(std::string_view s);
  void append_array_header(ValueType elem, std::uint64_t n);
  ValueType type_;
  std::vector<std::byte> payload_;
};

// Human-readable rendering for dumps: scalars in full, strings quoted and cut after
// `max_string` bytes, arrays as "[a, b, c, ... (N items)]" showing `max_items` elements.
std::string format_value(const Value& v, std::size_t max_items = 6, std::size_t max_string = 60);

}  // namespace fucina::gguf
