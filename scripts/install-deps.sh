#!/usr/bin/env bash
# Installs the Debian 12 packages Fucina builds and tests with. Idempotent.
set -euo pipefail
# clang + libclang-rt-14-dev: the clang build and libFuzzer (the fuzz preset).
# python3-jsonschema: the independent validator of tests/grammar/sampling_check.py.
# libcpp-httplib-dev: fucina serve. python3, nodejs: the server's HTTP tests (tests/serve);
# the openai-client test also needs npm: Debian's `npm`, added below unless an npm is already
# there (nodesource's nodejs carries its own and conflicts with Debian's).
PKGS=(build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
      libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
      libxsimd-dev libcpp-httplib-dev libpcre2-dev libopenblas-dev
      python3 python3-jsonschema nodejs)
command -v npm >/dev/null || PKGS+=(npm)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
