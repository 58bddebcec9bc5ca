#!/usr/bin/env bash
# Constrained vs unconstrained decode speed of `fucina run` on one model, runs interleaved
# (the order alternating per rep), and optionally llama.cpp's sampling time with and without
# the same JSON schema (its `common_perf_print: sampling time`, which holds the grammar work).
#   bench/compare_grammar.sh FUCINA MODEL.gguf SCHEMA.json [REPS=5] [N=64] [LLAMA_COMPLETION]
# Prints one line per run, the medians of generated tok/s, and the median share of the
# constrained runs' generation time that went to the grammar (fucina run's "grammar N ms"),
# which a loaded machine's noise does not blur as it blurs the tok/s ratio.
set -euo pipefail
fucina=$1 model=$2 schema=$3 reps=${4:-5} n=${5:-64} llama=${6:-}
prompt="Write a JSON record:"
common=(-p "$prompt" -n "$n" --temp 1 --seed 1 -t 2)
tps() { grep -o 'generated [0-9]* tokens in [0-9.]* ms ([0-9.]* tok/s)' | grep -o '([0-9.]*' | tr -d '('; }
free=() constrained=() shares=()
for ((r = 0; r < reps; r++)); do
  for kind in $([[ $((r % 2)) == 0 ]] && echo "free schema" || echo "schema free"); do
    if [[ $kind == free ]]; then
      t=$("$fucina" run "$model" "${common[@]}" 2>&1 >/dev/null | tps); free+=("$t")
    else
      err=$("$fucina" run "$model" "${common[@]}" --json-schema-file "$schema" 2>&1 >/dev/null)
      t=$(tps <<<"$err"); constrained+=("$t")
      gen_ms=$(grep -o 'generated [0-9]* tokens in [0-9.]* ms' <<<"$err" | grep -o '[0-9.]* ms' | tr -d ' ms')
      grammar_ms=$(grep -o 'grammar [0-9.]* ms' <<<"$err" | grep -o '[0-9.]*')
      share=$(awk -v g="$grammar_ms" -v t="$gen_ms" 'BEGIN {printf "%.1f", 100 * g / t}')
      shares+=("$share")
      t="$t (grammar $grammar_ms of $gen_ms ms, $share%)"
    fi
    echo "rep $r $kind: $t tok/s"
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
mf=$(median "${free[@]}") mc=$(median "${constrained[@]}")
echo "median tok/s: unconstrained $mf, constrained $mc, ratio $(awk -v a="$mc" -v b="$mf" 'BEGIN {printf "%.3f", a / b}')"
echo "median share of the constrained generation spent on the grammar: $(median "${shares[@]}")%"
if [[ -n $llama ]]; then
  for kind in free schema; do
    extra=(); [[ $kind == schema ]] && extra=(--json-schema "$(cat "$schema")")
    "$llama" -m "$model" "${common[@]}" -no-cnv "${extra[@]}" 2>&1 >/dev/null |
      grep -E 'sampling time|eval time' | sed "s/^/llama.cpp $kind: /"
  done
fi
