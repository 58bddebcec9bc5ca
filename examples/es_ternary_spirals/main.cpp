// es_ternary_spirals: trains a spirals MLP whose H×H and head weights are ternary,
// {−1, 0, +1}·scale, with evolution strategies (no gradient exists for them). Forward
// passes only. Flags: see ../es_spirals/demo_main.hpp.
#include "../es_spirals/demo_main.hpp"

int main(int argc, char** argv) {
  return es_demo_cli::es_demo_main(argc, argv, fucina::es::demo::ternary_options(), "es_ternary_spirals",
                                   " (ternary h1→h2, h2→class)");
}
