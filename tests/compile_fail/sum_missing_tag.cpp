// expect: tensor tag not found
// Reducing over a tag the tensor does not have.
#include "fucina/fucina.hpp"
using namespace fucina;
void f(Context& ctx, const Tensor<"a", "b">& x) {
#ifndef FUCINA_CF_CONTROL
  (void)x.sum<"c">(ctx);
#else
  (void)x.sum<"b">(ctx);
#endif
}
