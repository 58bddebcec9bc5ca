#!/usr/bin/env bash
# The official `openai` npm client against `fucina serve` (openai_client.test.mjs, node --test).
# usage: run_openai_node_test.sh FUCINA_BIN WORK_DIR
# The package is installed with npm into WORK_DIR (the build tree) once. Without node >= 18,
# npm, or a reachable npm registry the test is skipped (exit 77) with the reason.
set -euo pipefail
fucina=$1 work=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
command -v node >/dev/null || skip "node is not installed (Debian: nodejs)"
command -v npm >/dev/null || skip "npm is not installed (Debian: npm)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
((node_major >= 18)) || skip "node $node_major is too old for node --test (18 or later)"
mkdir -p "$work"
if [[ ! -f $work/node_modules/openai/package.json ]]; then
  timeout 180 npm install --prefix "$work" "openai@6" --no-audit --no-fund --loglevel=error >"$work/npm.log" 2>&1 ||
    skip "npm could not install openai (no registry access?): $(tail -n 3 "$work/npm.log")"
fi
echo "openai $(node -p "require('$work/node_modules/openai/package.json').version"), node $(node --version)"
FUCINA_BIN=$fucina OPENAI_PREFIX=$work WORK_DIR=$work exec node --test --test-concurrency=1 "$here/openai_client.test.mjs"
