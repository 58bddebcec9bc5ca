#pragma once
// Two error tiers (see docs/ARCHITECTURE.md):
//  - FUCINA_CHECK(cond, code, fmt, ...) validates user input at an op/API boundary and
//    throws fucina::Error. Messages start with "[op]" and name the axis/offset/sizes.
//  - FUCINA_ASSERT(cond) guards our own invariants; a failure is a bug in Fucina.
#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fucina {

enum class ErrorCode : std::uint8_t {
  ShapeMismatch,     // same tag, different sizes; incompatible operands
  InvalidShape,      // a shape that no op accepts (zero dim, rank > 8, bad split)
  UnsupportedView,   // a view that needs a copy (e.g. merge over incompatible strides)
  IndexOutOfBounds,  // narrow/select/gather past an axis
  InvalidArgument,   // any other bad argument (option value, dtype, ...)
  InvalidFile,       // malformed input file (GGUF, tokenizer data, ...)
  Io,                // the OS refused a read/write/mmap
  Unsupported,       // valid request that this build does not implement
  Internal,          // a broken invariant (bug)
};

constexpr std::string_view to_string(ErrorCode c) {
  switch (c) {
    case ErrorCode::ShapeMismatch: return "ShapeMismatch";
    case ErrorCode::InvalidShape: return "InvalidShape";
    case ErrorCode::UnsupportedView: return "UnsupportedView";
    case ErrorCode::IndexOutOfBounds: return "IndexOutOfBounds";
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::InvalidFile: return "InvalidFile";
    case ErrorCode::Io: return "Io";
    case ErrorCode::Unsupported: return "Unsupported";
    case ErrorCode::Internal: return "Internal";
  }
  return "?";
}

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

[[noreturn]] inline void fail(ErrorCode code, const std::string& msg) { throw Error(code, msg); }

}  // namespace fucina

#define FUCINA_CHECK(cond, code, ...)                                                    \
  do {                                                                                   \
    if (!(cond)) [[unlikely]]                                                            \
      ::fucina::fail(::fucina::ErrorCode::code, ::fmt::format(__VA_ARGS__));             \
  } while (0)

#define FUCINA_ASSERT(cond)                                                              \
  do {                                                                                   \
    if (!(cond)) [[unlikely]]                                                            \
      ::fucina::fail(::fucina::ErrorCode::Internal,                                      \
                     ::fmt::format("internal invariant failed: {} ({}:{})", #cond,       \
                                   __FILE__, __LINE__));                                 \
  } while (0)
