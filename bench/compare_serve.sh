#!/usr/bin/env bash
# fucina serve side by side with llama-server on the same model and flags: for each client
# count, aggregate generated tokens/s and time-to-first-token p50/p99 (bench/serve_load.py,
# streamed /v1/completions, temperature 0, ignore_eos). Loopback only, bounded in time.
#
#   bench/compare_serve.sh [-c 1,8,32] [-s 30] [-n 64] [-t 2] [--parallel N] [--ctx 2048] MODEL.gguf
#
# Needs llama-server (LLAMA_SERVER=, default the peer build) and the fucina CLI (FUCINA=).
# Both get N slots (--parallel, default 8); llama-server -np N, N times the context (its
# context is shared by the slots) and flash attention on, as fucina's attention is.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
FUCINA=${FUCINA:-$here/build/release/fucina}
LLAMA_SERVER=${LLAMA_SERVER:-$HOME/.cache/fucina-peers/llama.cpp/build/bin/llama-server}
PY=${PY:-python3}
clients=1,8,32 seconds=30 ntok=64 threads=2 parallel=8 ctx=2048 model=
while (($#)); do
  case $1 in
    -c) clients=$2; shift 2 ;;
    -s) seconds=$2; shift 2 ;;
    -n) ntok=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --ctx) ctx=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    -*) echo "compare_serve.sh: unknown option $1" >&2; exit 2 ;;
    *) model=$1; shift ;;
  esac
done
[[ -n $model ]] || { echo "compare_serve.sh: no model given" >&2; exit 2; }
[[ -x $FUCINA ]] || { echo "compare_serve.sh: $FUCINA not built" >&2; exit 2; }
[[ -x $LLAMA_SERVER ]] || { echo "compare_serve.sh: llama-server not found at $LLAMA_SERVER" >&2; exit 2; }
log=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill $pid 2>/dev/null; rm -rf "$log"' EXIT

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_ready() {  # $1 port
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "compare_serve.sh: the server on port $1 did not become ready" >&2; return 1
}
run_engine() {  # $1 label, then the server command
  local label=$1 port; shift
  port=$(free_port)
  "$@" --port "$port" >"$log/$label.log" 2>&1 &
  pid=$!
  wait_ready "$port"
  IFS=, read -ra counts <<<"$clients"
  for c in "${counts[@]}"; do
    $PY "$here/bench/serve_load.py" --url "http://127.0.0.1:$port" --clients "$c" --seconds "$seconds" \
      --max-tokens "$ntok" --pid "$pid" --label "$label"
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
}
run_engine fucina "$FUCINA" serve "$model" -t "$threads" -c "$ctx" --parallel "$parallel" --max-queue 256
run_engine llama.cpp "$LLAMA_SERVER" -m "$model" -t "$threads" -c $((ctx * parallel)) -np "$parallel" -fa on --host 127.0.0.1
