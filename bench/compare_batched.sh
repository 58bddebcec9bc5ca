#!/usr/bin/env bash
# Batched decode and decode at depth, fucina beside llama.cpp (issue 20), on the four bench
# models: the Qwen3-0.6B shape from `fucina synth` (Qwen2 tokenizer) in F16, quantized by
# `fucina quantize` to Q8_0, Q4_0 and Q4_K_M (made in DIR when missing).
#
#   bench/compare_batched.sh [-r 2] [-t 2] [-n 128] [-d 4096] DIR
#
# Per model, runs interleaved so drift in machine load hits both engines alike:
#   fucina bench M --parallel 1,2,4,8 -p 128 -n 128 -o json
#   llama-batched-bench -m M -npp 128 -ntg 128 -npl 1,2,4,8 -fa on --output-format jsonl
#   fucina bench M -p 0 -n N -d 0,D -o json
#   llama-bench -m M -fa 1 -p 0 -n N -d 0,D -o json
# and prints two markdown tables with the load average before and after (the machine may be
# shared: say so beside the numbers). Needs the llama.cpp peer build (LLAMA_BIN=, default
# ../shared/peers/llama-cpp.sh --print) and the fucina CLI (FUCINA=, default
# build/release/fucina); /usr/bin/python3 for the JSON arithmetic (standard library only).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
FUCINA=${FUCINA:-$here/build/release/fucina}
if [[ -z "${LLAMA_BIN:-}" ]]; then
  LLAMA_BIN=$("$here/../shared/peers/llama-cpp.sh" --print 2>/dev/null || echo "$HOME/.cache/fucina-peers/llama.cpp/build/bin")
fi
PY=${PY:-/usr/bin/python3}

reps=2 threads=2 tg=128 depth=4096 dir=
while (($#)); do
  case $1 in
    -r) reps=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -n) tg=$2; shift 2 ;;
    -d) depth=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "compare_batched.sh: unknown option $1" >&2; exit 2 ;;
    *) dir=$1; shift ;;
  esac
done
[[ -n $dir ]] || { echo "compare_batched.sh: no model directory given" >&2; exit 2; }
[[ -x $FUCINA ]] || { echo "compare_batched.sh: $FUCINA not built (cmake --build build/release --target fucina)" >&2; exit 2; }
for t in llama-batched-bench llama-bench; do
  [[ -x $LLAMA_BIN/$t ]] || { echo "compare_batched.sh: $t not found in $LLAMA_BIN (run ../shared/peers/llama-cpp.sh)" >&2; exit 2; }
done

mkdir -p "$dir"
f16=$dir/qwen3-0.6b-F16.gguf
if [[ ! -f $f16 ]]; then
  "$FUCINA" synth "$f16" --arch qwen3 --hidden 1024 --layers 28 --heads 16 --kv-heads 8 --head-dim 128 --ffn 3072 \
    --ctx 40960 --rope-base 1000000 --tied --dtype f16 --vocab "$here/../shared/vocab/ggml-vocab-qwen2.gguf" >&2
fi
models=("$f16")
for q in Q8_0 Q4_0 Q4_K_M; do
  m=$dir/qwen3-0.6b-$q.gguf
  [[ -f $m ]] || "$FUCINA" quantize "$f16" "$m" "$q" >&2
  models+=("$m")
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "load average before: $(load)" >"$out/load"
ctx=$((8 * (128 + 128)))
for m in "${models[@]}"; do
  b=$(basename "$m" .gguf)
  echo "== $b: batched, fucina" >&2
  "$FUCINA" bench "$m" --parallel 1,2,4,8 -p 128 -n 128 -r "$reps" -t "$threads" -o json >"$out/fb.$b.json"
  echo "== $b: batched, llama.cpp" >&2
  "$LLAMA_BIN/llama-batched-bench" -m "$m" -c "$ctx" -b 2048 -ub 512 -npp 128 -ntg 128 -npl 1,2,4,8 -fa on \
    -t "$threads" --output-format jsonl 2>/dev/null | grep '^{' >"$out/lb.$b.jsonl"
  echo "== $b: depth, fucina" >&2
  "$FUCINA" bench "$m" -p 0 -n "$tg" -d "0,$depth" -r "$reps" -t "$threads" -o json >"$out/fd.$b.json"
  echo "== $b: depth, llama.cpp" >&2
  "$LLAMA_BIN/llama-bench" -m "$m" -fa 1 -p 0 -n "$tg" -d "0,$depth" -r "$reps" -t "$threads" -o json \
    >"$out/ld.$b.json" 2>/dev/null
  echo "  load average now: $(load)" >&2
done
echo "load average after: $(load)" >>"$out/load"

"$PY" - "$out" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
model = lambda p, pre: os.path.basename(p)[len(pre):].rsplit(".", 1)[0]
ratio = lambda a, b: f"{a / b:.2f}x" if b else "-"
num = lambda x: f"{x:.2f}" if x else "-"
print(open(os.path.join(out, "load")).read().strip())
print()
print("| model | streams | fucina S_TG t/s | llama.cpp S_TG t/s | fucina/llama.cpp | fucina vs its 1 stream |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for p in sorted(glob.glob(os.path.join(out, "fb.*.json"))):
    m = model(p, "fb.")
    ours = {r["pl"]: r["speed_tg"] for r in json.load(open(p))}
    theirs = {r["pl"]: r["speed_tg"] for r in map(json.loads, open(os.path.join(out, f"lb.{m}.jsonl")))}
    for pl in sorted(ours):
        l = theirs.get(pl)
        print(f"| {m} | {pl} | {ours[pl]:.2f} | {num(l)} | {ratio(ours[pl], l)} | {ratio(ours[pl], ours[min(ours)])} |")
print()
print("| model | test | fucina t/s | llama.cpp t/s | fucina/llama.cpp |")
print("| --- | --- | ---: | ---: | ---: |")
for p in sorted(glob.glob(os.path.join(out, "fd.*.json"))):
    m = model(p, "fd.")
    recs = json.load(open(p))
    ours = {r["n_depth"]: r["avg_ts"] for r in recs}
    theirs = {r["n_depth"]: r["avg_ts"] for r in json.load(open(os.path.join(out, f"ld.{m}.json")))}
    for d in sorted(ours):
        test = f"tg{recs[0]['n_gen']}" + (f" @ d{d}" if d else "")
        print(f"| {m} | {test} | {ours[d]:.2f} | {num(theirs.get(d))} | {ratio(ours[d], theirs.get(d))} |")
EOF
