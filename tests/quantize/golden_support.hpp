#pragma once
// Reads tests/data/quantize/goldens.json (sha256 of llama-quantize's output per model, TYPE
// and flags; made by tools/dev/quantize_goldens/make_goldens.sh) and hashes fucina's output.
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fucina/quant/quantize_model.hpp"
#include "quantize/sha256.hpp"
#include "quantize/synth_model.hpp"
#include "support/shared_dir.hpp"

namespace fucina::test {

struct QuantizeGolden {
  std::string type;
  std::string flags;  // "", "--pure", "--leave-output-tensor"
  std::string sha256;
};

struct QuantizeGoldenModel {
  std::string name;
  std::string source;  // "synthetic" or "shared"
  std::string input_sha256;
  std::vector<QuantizeGolden> outputs;
};

inline std::vector<QuantizeGoldenModel> load_quantize_goldens() {
  std::ifstream f(test_data_dir() / "quantize" / "goldens.json");
  if (!f) throw std::runtime_error("cannot open tests/data/quantize/goldens.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  std::vector<QuantizeGoldenModel> out;
  for (const auto& m : j.at("models")) {
    QuantizeGoldenModel g{m.at("name"), m.at("source"), m.at("input_sha256"), {}};
    for (const auto& o : m.at("outputs")) g.outputs.push_back({o.at("type"), o.at("flags"), o.at("sha256")});
    out.push_back(std::move(g));
  }
  return out;
}

// The unit suite's subset (the rest runs in test_quantize_slow): the TYPEs the issue names
// plus the float paths and one --pure mix.
inline bool is_core_golden(const QuantizeGolden& g) {
  for (const char* t : {"COPY", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"})
    if (g.type == t && g.flags.empty()) return true;
  return g.type == "Q4_K_M" && g.flags == "--pure";
}

inline quant::QuantizeOptions golden_options(const QuantizeGolden& g, int n_threads) {
  const auto target = quant::find_quantize_target(g.type);
  if (!target) throw std::runtime_error("unknown golden type " + g.type);
  quant::QuantizeOptions o;
  o.ftype = target->ftype;
  o.copy_only = target->copy_only;
  std::istringstream flags(g.flags);
  for (std::string f; flags >> f;) {
    if (f == "--pure") o.pure = true;
    else if (f == "--leave-output-tensor") o.leave_output = true;
    else if (std::string kv; f == "--override-kv" && flags >> kv) o.kv_overrides.push_back(quant::parse_kv_override(kv));
    else throw std::runtime_error("unknown golden flag " + f);
  }
  o.n_threads = n_threads;
  return o;
}

// sha256 of the streamed output, never materialized.
inline std::string quantized_sha256(const gguf::Reader& r, const quant::QuantizeOptions& o) {
  Sha256 h;
  quant::quantize_model(r, o, [&](gguf::Bytes b) { h.update(b); });
  return h.hex();
}

// Regenerates each synthetic model, checks its bytes are the ones the goldens were made
// from, then checks every golden that passes `keep`. Returns how many were checked.
template <class Keep>
int check_synthetic_goldens(Keep keep) {
  const auto goldens = load_quantize_goldens();
  int checked = 0;
  for (const auto& spec : synth_specs()) {
    const QuantizeGoldenModel* g = nullptr;
    for (const auto& m : goldens)
      if (m.name == spec.name) g = &m;
    EXPECT_NE(g, nullptr) << spec.name << " missing from goldens.json";
    if (g == nullptr) continue;
    const auto bytes = make_synth_model(spec);
    EXPECT_EQ(sha256_hex(bytes), g->input_sha256)
        << spec.name << ": synth_model.hpp no longer writes the bytes the goldens were made from; rerun "
        << "tools/dev/quantize_goldens/make_goldens.sh";
    const auto r = gguf::Reader::parse(gguf::Bytes(bytes));
    for (const auto& o : g->outputs) {
      if (!keep(o)) continue;
      EXPECT_EQ(quantized_sha256(r, golden_options(o, 2)), o.sha256) << spec.name << " " << o.type << " " << o.flags;
      ++checked;
    }
  }
  return checked;
}

}  // namespace fucina::test
