#pragma once
// Note [Huge pages]: memory that a hot loop streams through in long runs -- the packed
// weights (quant/packed.hpp) and small KV caches and pools (Note [KV cache pages]) -- is taken
// 2 MiB-aligned and advised as transparent huge pages (MADV_HUGEPAGE; the machine's THP
// setting is "madvise"). For the weights one TLB entry then covers 2 MiB instead of 4 KiB;
// for a KV pool the gain is that rows first written inside a decode step fault in once per
// 2 MiB instead of once per 4 KiB (a fault costs a VM exit here; docs/BENCHMARK.md, issue 20
// tenth part). The advice is only advice: where the kernel has no huge page to give, 4 KiB
// pages work the same. The price is commit granularity: a touched byte commits its whole
// 2 MiB. So memory that stays mostly unwritten keeps 4 KiB pages: a solo KvCache sized for a
// long context, and a KV pool whose head regions are larger than a huge page (its sequences
// fill each head region from the front, so 2 MiB pages would commit 2 MiB per layer, K/V and
// head at the first token, ~0.9 GB for Qwen3-0.6B's shape).
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
