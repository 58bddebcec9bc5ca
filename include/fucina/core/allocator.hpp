#pragma once
// Where a Context draws result buffers from. The BufferPool is the default (and the
// design); the interface exists so the rejected alternative, an arena, can be measured
// against it on the same ops (bench/bench_memory.cpp, docs/MEMORY-MODEL.md).
#include <cstddef>

#include "fucina/core/buffer.hpp"

namespace fucina {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Uninitialised storage of at least `bytes` bytes, 64-byte aligned.
  virtual BufferRef acquire(std::size_t bytes) = 0;
};

}  // namespace fucina
