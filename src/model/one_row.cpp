#include "fucina/model/one_row.hpp"

namespace fucina::model {

namespace {
thread_local int t_one_row = 0;
}  // namespace

bool one_row_arithmetic() noexcept { return t_one_row > 0; }
OneRowArithmetic::OneRowArithmetic() noexcept { ++t_one_row; }
OneRowArithmetic::~OneRowArithmetic() { --t_one_row; }

}  // namespace fucina::model
