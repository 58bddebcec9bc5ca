#!/usr/bin/env bash
# fucina quantize vs llama-quantize wall time on one model, interleaved runs (the order
# alternates each rep), outputs checked byte-identical. Prints one line per run and the
# median per (tool, TYPE).
#   bench/compare_quantize.sh FUCINA_BIN MODEL.gguf [REPS] [THREADS] [TYPES...]
set -euo pipefail
fucina=${1:?FUCINA_BIN}; model=${2:?MODEL.gguf}; reps=${3:-3}; threads=${4:-2}; shift $(($# < 4 ? $# : 4))
types=("$@"); [ ${#types[@]} -gt 0 ] || types=(Q8_0 Q4_0 Q4_K_M)
repo=$(cd "$(dirname "$0")/.." && pwd)
lq="$("${FUCINA_SHARED:-$repo/../shared}/peers/llama-cpp.sh" --print)/llama-quantize"
out=${TMPDIR:-/tmp}/compare_quantize.$$
trap 'rm -f "$out".*' EXIT
cat "$model" > /dev/null  # warm the page cache for both sides

run() {  # tool type -> seconds
  local tool=$1 t=$2 t0 t1
  sync
  t0=$(date +%s.%N)
  if [ "$tool" = llama ]; then "$lq" "$model" "$out.llama" "$t" "$threads" > /dev/null 2>&1
  else "$fucina" quantize -t "$threads" "$model" "$out.fucina" "$t" > /dev/null 2>&1; fi
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}

declare -A times
for ((r = 0; r < reps; r++)); do
  for t in "${types[@]}"; do
    order=(llama fucina); ((r % 2)) && order=(fucina llama)
    for tool in "${order[@]}"; do
      s=$(run "$tool" "$t")
      times[$tool.$t]+="$s "
      echo "rep $r $t $tool ${s}s (load $(cut -d' ' -f1 /proc/loadavg))"
    done
    cmp -s "$out.llama" "$out.fucina" && echo "  $t: outputs identical" || echo "  $t: OUTPUTS DIFFER"
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo "TYPE llama-quantize(s) fucina(s) ratio"
for t in "${types[@]}"; do
  l=$(echo "${times[llama.$t]}" | median); f=$(echo "${times[fucina.$t]}" | median)
  echo "$t $l $f $(echo "scale=3; $f / $l" | bc)"
done
