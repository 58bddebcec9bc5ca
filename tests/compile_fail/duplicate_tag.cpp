// expect: duplicate tag
// A tensor type naming the same axis twice.
#include "fucina/fucina.hpp"
using namespace fucina;
#ifndef FUCINA_CF_CONTROL
Tensor<"seq", "embd", "seq"> bad;
#else
Tensor<"seq", "embd"> good;
#endif
