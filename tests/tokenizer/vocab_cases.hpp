#pragma once
// Reads llama.cpp tokenizer test pairs: NAME.inp holds the inputs separated by
// "\n__ggml_vocab_test__\n", NAME.out one line of space-separated ids per input.
// (The same layout serves our own committed cases under tests/data/tokenizer.)
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fucina::test {

struct VocabCase {
  std::string text;
  std::vector<std::int32_t> ids;
};

inline std::string read_file_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Empty when the files are missing or their case counts disagree.
inline std::vector<VocabCase> read_vocab_cases(const std::filesystem::path& inp, const std::filesystem::path& out) {
  if (!std::filesystem::exists(inp) || !std::filesystem::exists(out)) return {};
  const std::string raw = read_file_bytes(inp);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  std::size_t pos = 0;
  while (pos < raw.size()) {
    const std::size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<std::vector<std::int32_t>> outputs;
  std::istringstream lines(read_file_bytes(out));
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::int32_t> ids;
    std::istringstream ls(line);
    for (std::int64_t v; ls >> v;) ids.push_back(static_cast<std::int32_t>(v));
    outputs.push_back(std::move(ids));
  }
  if (inputs.size() != outputs.size()) return {};
  std::vector<VocabCase> cases;
  for (std::size_t i = 0; i < inputs.size(); ++i) cases.push_back({inputs[i], outputs[i]});
  return cases;
}

}  // namespace fucina::test
