// Writes the synthetic quantize inputs (tests/quantize/synth_model.hpp) into a directory,
// so the llama.cpp peer can quantize the exact bytes the tests regenerate.
#include <cstdio>
#include <filesystem>
#include <span>

#include "fucina/core/atomic_file.hpp"

#include "quantize/sha256.hpp"
#include "quantize/synth_model.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_synth OUT_DIR\n");
    return 2;
  }
  for (const auto& spec : fucina::test::synth_specs()) {
    const auto bytes = fucina::test::make_synth_model(spec);
    const auto path = std::filesystem::path(argv[1]) / (spec.name + ".gguf");
    fucina::write_file_atomic(path, std::as_bytes(std::span(bytes)));
    std::printf("%s %s\n", fucina::test::sha256_hex(bytes).c_str(), path.c_str());
  }
  return 0;
}
