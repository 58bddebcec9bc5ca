#pragma once
// Note [Huge pages]: memory that a hot loop streams through in long runs -- the packed
// weights (quant/packed.hpp) and the batched KV pool (model/paged_kv_cache.hpp) -- is taken
// 2 MiB-aligned and advised as transparent huge pages (MADV_HUGEPAGE; the machine's THP
// setting is "madvise"). One TLB entry then covers 2 MiB instead of 4 KiB, and memory first
// touched inside a timed step faults in once per 2 MiB instead of once per 4 KiB (a fault
// costs a VM exit here). The advice is only advice: where the kernel has no huge page to
// give, 4 KiB pages work the same. The price is commit granularity: a touched byte commits
// its whole 2 MiB, so memory that stays mostly unwritten (a solo KvCache sized for a long
// context) keeps 4 KiB pages.
#include <cstddef>
#include <memory>

#include "fucina/core/buffer.hpp"

namespace fucina {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// `bytes` (rounded up to `align`) of uninitialised memory aligned to `align`, a power of
// two >= 64; advised as huge pages when align is kHugePageBytes. Throws on out-of-memory.
std::shared_ptr<std::byte> aligned_block(std::size_t bytes, std::size_t align);

// An aligned_block as a Buffer for tensors, freed with its last reference.
BufferRef aligned_buffer(std::size_t bytes, std::size_t align);

}  // namespace fucina
