#pragma once
// Umbrella header: the named-axis tensor core.
#include "fucina/core/context.hpp"
#include "fucina/core/error.hpp"
#include "fucina/core/ops/contract.hpp"
#include "fucina/core/ops/index.hpp"
#include "fucina/core/ops/methods.hpp"
#include "fucina/core/ops/nn.hpp"
#include "fucina/core/ops/pointwise.hpp"
#include "fucina/core/ops/reduce.hpp"
#include "fucina/core/ops/view.hpp"
#include "fucina/core/tensor.hpp"
