// libFuzzer target for the GGUF reader: any input must parse or throw fucina::Error, never
// crash or read out of bounds. Parsed files are also walked through every accessor and
// re-emitted; a re-emitted file must parse again.
#include <cstddef>
#include <cstdint>

#include "fucina/core/error.hpp"
#include "fucina/gguf/reader.hpp"
#include "fucina/gguf/writer.hpp"

namespace {

using namespace fucina::gguf;

void walk(const Reader& r) {
  for (const KeyValue& kv : r.metadata()) {
    (void)format_value(kv.value, 4, 16);
    const Value& v = kv.value;
    try {
      if (is_integer(v.type())) (void)r.get_int(kv.key);
      if (v.type() == ValueType::String) (void)r.get_string(kv.key);
      if (v.type() == ValueType::Array) {
        const ArrayView a = v.as_array();
        if (a.element_type() == ValueType::String) (void)r.get_string_array(kv.key);
        if (is_integer(a.element_type())) (void)r.get_int_array(kv.key);
        if (a.element_type() == ValueType::Float32) (void)r.get_array<float>(kv.key);
      }
    } catch (const fucina::Error&) {
      // A u64 above INT64_MAX is a legitimate get_int refusal.
    }
  }
  std::uint64_t sum = 0;
  for (const TensorInfo& t : r.tensors()) {
    const Bytes d = r.tensor_data(t);
    if (!d.empty()) sum += static_cast<std::uint8_t>(d.front()) + static_cast<std::uint8_t>(d.back());
  }
  (void)sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Bytes bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const Reader r = Reader::parse(bytes);
    walk(r);
    const Writer w = Writer::from_reader(r);
    // Overlapping tensors could make the packed copy huge: only re-emit small ones.
    if (w.total_size() <= 4 * static_cast<std::uint64_t>(size) + 4096) {
      const Reader again = Reader::parse(w.to_bytes());
      if (again.metadata().size() != r.metadata().size() || again.tensors().size() != r.tensors().size())
        __builtin_trap();
    }
  } catch (const fucina::Error&) {
  }
  return 0;
}
