// expect: merge tags must be adjacent and in tensor order
// Merging axes that are not neighbours.
#include "fucina/fucina.hpp"
using namespace fucina;
void f(const Tensor<"a", "b", "c">& x) {
#ifndef FUCINA_CF_CONTROL
  (void)merge<"a", "c", "ac">(x);
#else
  (void)merge<"a", "b", "ab">(x);
#endif
}
