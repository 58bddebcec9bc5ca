#pragma once
// Adapter from autograd leaf variables to the optimizers' ParamRef list. The value is
// updated in place through the leaf's storage; the gradient span stays valid until the
// variable's gradient is next accumulated or zeroed.
#include <string>
#include <vector>

#include "fucina/core/tensor.hpp"
#include "fucina/optim/param.hpp"

namespace fucina::optim {

template <FloatTensor T>
ParamRef param_ref(std::string name, T& var) {
  FUCINA_CHECK(var.is_leaf(), InvalidArgument, "[optim] parameter '{}' is not a leaf variable (call variable())", name);
  ParamRef p;
  p.name = std::move(name);
  p.value = var.mutable_data();
  const T g = var.grad();
  if (g.defined()) p.grad = g.data();
  for (auto s : var.sizes()) p.shape.push_back(s);
  return p;
}

}  // namespace fucina::optim
