#include "fucina/model/one_row.hpp"

namespace fucina::model {

namespace {
thread_local std::int64_t t_one_row_rows = 0;
}  // namespace

std::int64_t one_row_rows() noexcept { return t_one_row_rows; }
OneRowArithmetic::OneRowArithmetic(std::int64_t rows) noexcept : outer_(t_one_row_rows) { t_one_row_rows = rows; }
OneRowArithmetic::~OneRowArithmetic() { t_one_row_rows = outer_; }

}  // namespace fucina::model
