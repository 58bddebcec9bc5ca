#pragma once
// Helpers of the grammar tests: llama.cpp's cases carried over as data (tests/data/grammar,
// scripts/parity/extract_grammar_cases.py) and whole-string matching.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fucina/grammar/matcher.hpp"
#include "support/shared_dir.hpp"

namespace fucina::test {

inline nlohmann::json load_grammar_cases(const std::string& name) {
  std::ifstream in(test_data_dir() / "grammar" / name);
  EXPECT_TRUE(in) << name;
  return nlohmann::json::parse(in);
}

// Every byte accepted and the text complete.
inline bool matches(const std::shared_ptr<const grammar::Grammar>& g, std::string_view s) {
  grammar::Matcher m(g);
  return m.accept(s) && m.complete();
}

}  // namespace fucina::test
