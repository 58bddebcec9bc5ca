// es_spirals: trains the two-spirals MLP from scratch with evolution strategies. Forward
// passes only, no backward anywhere: every member is scored by one scalar, −CE.
// Flags: see demo_main.hpp.
#include "demo_main.hpp"

int main(int argc, char** argv) {
  return es_demo_cli::es_demo_main(argc, argv, fucina::es::demo::spirals_options(), "es_spirals", "");
}
