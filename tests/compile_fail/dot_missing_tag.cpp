// expect: tensor tag not found
// Contracting a tag that one operand does not have.
#include "fucina/fucina.hpp"
using namespace fucina;
void f(Context& ctx, const Tensor<"batch", "in">& x, const Tensor<"in", "out">& w) {
#ifndef FUCINA_CF_CONTROL
  (void)x.dot<"hidden">(ctx, w);
#else
  (void)x.dot<"in">(ctx, w);
#endif
}
