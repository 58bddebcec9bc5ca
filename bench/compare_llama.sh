#!/usr/bin/env bash
# Side-by-side speed of fucina and llama.cpp on the same GGUFs: same threads, same tests,
# runs interleaved (fucina, llama.cpp, fucina, llama.cpp, ...) so drift in machine load
# hits both engines alike. Prints one row per test with both means and fucina/llama.cpp.
#
#   bench/compare_llama.sh [-p 512] [-n 128] [-r 3] [-t 2] [--rounds 2] MODEL.gguf...
#
# Needs llama-bench (../shared/peers/llama-cpp.sh builds it; override with LLAMA_BENCH=)
# and the fucina CLI (FUCINA=, default build/release/fucina). Uses /usr/bin/python3 for
# the JSON arithmetic (standard library only).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
FUCINA=${FUCINA:-$here/build/release/fucina}
if [[ -z "${LLAMA_BENCH:-}" ]]; then
  peers=$("$here/../shared/peers/llama-cpp.sh" --print 2>/dev/null || echo "$HOME/.cache/fucina-peers/llama.cpp/build/bin")
  LLAMA_BENCH=$peers/llama-bench
fi
PY=${PY:-/usr/bin/python3}

pp=512 tg=128 reps=3 threads=2 rounds=2
models=()
while (($#)); do
  case $1 in
    -p) pp=$2; shift 2 ;;
    -n) tg=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    -*) echo "compare_llama.sh: unknown option $1" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
((${#models[@]})) || { echo "compare_llama.sh: no model given" >&2; exit 2; }
[[ -x $FUCINA ]] || { echo "compare_llama.sh: $FUCINA not built (cmake --build build/release --target fucina)" >&2; exit 2; }
[[ -x $LLAMA_BENCH ]] || { echo "compare_llama.sh: llama-bench not found at $LLAMA_BENCH (run ../shared/peers/llama-cpp.sh)" >&2; exit 2; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for m in "${models[@]}"; do
  [[ -f $m ]] || { echo "compare_llama.sh: no such model $m" >&2; exit 2; }
  for ((i = 0; i < rounds; ++i)); do
    echo "== $(basename "$m") round $((i + 1))/$rounds: fucina" >&2
    "$FUCINA" bench "$m" -p "$pp" -n "$tg" -r "$reps" -t "$threads" -o json >"$out/f.$(basename "$m").$i.json"
    echo "== $(basename "$m") round $((i + 1))/$rounds: llama.cpp" >&2
    "$LLAMA_BENCH" -m "$m" -p "$pp" -n "$tg" -r "$reps" -t "$threads" -o json >"$out/l.$(basename "$m").$i.json" 2>/dev/null
  done
done

"$PY" - "$out" <<'EOF'
import glob, json, os, statistics, sys
out = sys.argv[1]
samples = {}  # (engine, model, test) -> tokens/s samples
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    engine = "fucina" if os.path.basename(path).startswith("f.") else "llama.cpp"
    for r in json.load(open(path)):
        test = f"pp{r['n_prompt']}" if r["n_prompt"] > 0 else f"tg{r['n_gen']}"
        key = (engine, os.path.basename(r["model_filename"]), test)
        samples.setdefault(key, []).extend(r["samples_ts"])
rows = sorted({(m, t) for (_, m, t) in samples})
print("| model | test | fucina t/s | llama.cpp t/s | fucina/llama.cpp |")
print("| --- | --- | ---: | ---: | ---: |")
for m, t in rows:
    f = samples.get(("fucina", m, t), [])
    l = samples.get(("llama.cpp", m, t), [])
    if not f or not l:
        continue
    fm, lm = statistics.mean(f), statistics.mean(l)
    fs = statistics.stdev(f) if len(f) > 1 else 0.0
    ls = statistics.stdev(l) if len(l) > 1 else 0.0
    print(f"| {m} | {t} | {fm:.2f} ± {fs:.2f} | {lm:.2f} ± {ls:.2f} | {fm / lm:.2f}x |")
EOF
