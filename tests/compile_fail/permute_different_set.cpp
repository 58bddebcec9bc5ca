// expect: permute to a different tag set
// Permuting to tags that are not a reordering of the tensor's tags.
#include "fucina/fucina.hpp"
using namespace fucina;
void f(const Tensor<"a", "b">& x) {
#ifndef FUCINA_CF_CONTROL
  (void)x.permute<"b", "c">();
#else
  (void)x.permute<"b", "a">();
#endif
}
