// fucina inspect: dump a GGUF's header, metadata and tensor table (like llama.cpp's gguf dump).
#include <fmt/core.h>

#include <string>
#include <string_view>

#include "command.hpp"
#include "fucina/gguf/reader.hpp"

namespace {

using namespace fucina::gguf;

constexpr std::string_view usage =
    "usage: fucina inspect [options] MODEL.gguf\n"
    "\n"
    "Prints the GGUF version, alignment, metadata (key, type, value) and the tensor table\n"
    "(name, type, shape in ggml order, bytes, offset in the data section).\n"
    "\n"
    "options:\n"
    "  --items N       array elements shown per value (default 6)\n"
    "  --width N       string bytes shown per value (default 60)\n"
    "  --no-tensors    skip the tensor table\n"
    "  -h, --help      this help\n";

std::size_t parse_count(std::string_view flag, const char* v) {
  std::size_t n = 0;
  std::size_t used = 0;
  try {
    n = std::stoul(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || v[used] != '\0') throw fucina::cli::UsageError{fmt::format("{} needs a number, got '{}'", flag, v)};
  return n;
}

std::string type_label(const Value& v) {
  if (v.type() != ValueType::Array) return std::string(to_string(v.type()));
  const ArrayView a = v.as_array();
  return fmt::format("arr[{},{}]", to_string(a.element_type()), a.size());
}

std::string shape_label(const TensorInfo& t) {
  std::string s = "[";
  for (std::uint32_t d = 0; d < t.n_dims; ++d) s += fmt::format("{}{}", d ? ", " : "", t.ne[d]);
  return s + "]";
}

int inspect_main(std::span<char* const> args) {
  std::size_t items = 6, width = 60;
  bool tensors = true;
  std::string path;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "-h" || a == "--help") {
      fmt::print("{}", usage);
      return 0;
    }
    if (a == "--items" || a == "--width") {
      if (i + 1 >= args.size()) throw fucina::cli::UsageError{fmt::format("{} needs a value", a)};
      (a == "--items" ? items : width) = parse_count(a, args[++i]);
    } else if (a == "--no-tensors") {
      tensors = false;
    } else if (a.starts_with("-")) {
      throw fucina::cli::UsageError{fmt::format("unknown option '{}' (see --help)", a)};
    } else if (path.empty()) {
      path = a;
    } else {
      throw fucina::cli::UsageError{"expected one MODEL.gguf"};
    }
  }
  if (path.empty()) throw fucina::cli::UsageError{"missing MODEL.gguf (see --help)"};

  const Reader r = Reader::open(path);
  fmt::print("file: {} ({} bytes)\n", path, r.bytes().size());
  fmt::print("GGUF v{}, alignment {}, {} metadata keys, {} tensors, data section at byte {}\n", r.version(),
             r.alignment(), r.metadata().size(), r.tensors().size(), r.data_offset());

  fmt::print("\nmetadata:\n");
  std::size_t key_w = 3;
  for (const KeyValue& kv : r.metadata()) key_w = std::max(key_w, std::min<std::size_t>(kv.key.size(), 48));
  for (std::size_t i = 0; i < r.metadata().size(); ++i) {
    const KeyValue& kv = r.metadata()[i];
    fmt::print("  {:>4}  {:<{}}  {:<16}  {}\n", i, kv.key, key_w, type_label(kv.value),
               format_value(kv.value, items, width));
  }
  if (!tensors) return 0;

  fmt::print("\ntensors:\n");
  std::size_t name_w = 4;
  for (const TensorInfo& t : r.tensors()) name_w = std::max(name_w, std::min<std::size_t>(t.name.size(), 48));
  fmt::print("  {:>4}  {:<{}}  {:<8}  {:<24}  {:>12}  {:>12}\n", "#", "name", name_w, "type", "shape", "bytes",
             "offset");
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < r.tensors().size(); ++i) {
    const TensorInfo& t = r.tensors()[i];
    fmt::print("  {:>4}  {:<{}}  {:<8}  {:<24}  {:>12}  {:>12}\n", i, t.name, name_w, to_string(t.type),
               shape_label(t), t.size_bytes, t.offset);
    total += t.size_bytes;
  }
  fmt::print("total tensor bytes: {}\n", total);
  return 0;
}

const fucina::cli::Command reg{"inspect", "print a GGUF file's metadata and tensor table", inspect_main};

}  // namespace
