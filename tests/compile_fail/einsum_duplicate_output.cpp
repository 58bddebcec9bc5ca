// expect: duplicate tag
// An einsum output list naming one tag twice.
#include "fucina/fucina.hpp"
using namespace fucina;
void f(Context& ctx, const Tensor<"i", "k">& a, const Tensor<"k", "j">& b) {
#ifndef FUCINA_CF_CONTROL
  (void)einsum<"i", "i">(ctx, a, b);
#else
  (void)einsum<"i", "j">(ctx, a, b);
#endif
}
