// expect: einsum output tag not found in any operand
// An einsum output tag that exists in neither operand.
#include "fucina/fucina.hpp"
using namespace fucina;
void f(Context& ctx, const Tensor<"g", "i", "d">& a, const Tensor<"g", "j", "d">& b) {
#ifndef FUCINA_CF_CONTROL
  (void)einsum<"g", "i", "k">(ctx, a, b);
#else
  (void)einsum<"g", "i", "j">(ctx, a, b);
#endif
}
