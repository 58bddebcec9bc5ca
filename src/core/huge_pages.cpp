#include "fucina/core/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdlib>

#include "fucina/core/error.hpp"

namespace fucina {

std::shared_ptr<std::byte> aligned_block(std::size_t bytes, std::size_t align) {
  bytes = (bytes + align - 1) / align * align;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(align, bytes));
  FUCINA_CHECK(p != nullptr, Internal, "[memory] out of memory for {} bytes", bytes);
  if (align == kHugePageBytes) (void)::madvise(p, bytes, MADV_HUGEPAGE);  // Note [Huge pages]
  return {p, [](std::byte* q) { std::free(q); }};
}

BufferRef aligned_buffer(std::size_t bytes, std::size_t align) {
  auto* owner = new std::shared_ptr<std::byte>(aligned_block(bytes, align));
  return borrow_buffer(owner->get(), bytes, [](void* o) { delete static_cast<std::shared_ptr<std::byte>*>(o); }, owner);
}

}  // namespace fucina
