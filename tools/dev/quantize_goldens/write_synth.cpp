// Writes the synthetic quantize inputs (tests/quantize/synth_model.hpp) into a directory,
// so the llama.cpp peer can quantize the exact bytes the tests regenerate.
#include <cstdio>
#include <filesystem>
#include <fstream>

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
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(bytes.size()));
    std::printf("%s %s\n", fucina::test::sha256_hex(bytes).c_str(), path.c_str());
  }
  return 0;
}
