#!/usr/bin/env bash
# Tokenizer speed and id parity against llama.cpp on a 1 MiB text.
#   bench/compare_tokenizer.sh [BUILD_DIR]     (BUILD_DIR needs fucina + bench_tokenizer; Release)
# Corpus: the first 1 MiB of llama.cpp's own Markdown docs (paths sorted, C locale): English
# prose, code blocks, tables, some non-ASCII. For each vocab it reports
#   - encode time: llama.cpp's test-tokenizer-0 internal timer (llama_tokenize only, the
#     same call llama-tokenize makes) vs our bench_tokenizer (Tokenizer::encode), both
#     add_special=false, parse_special=false; best of 3 runs for llama.cpp;
#   - end-to-end CLI wall time: llama-tokenize vs fucina tokenize (load + encode + print);
#   - whether the 1 MiB id sequences are identical.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${FUCINA_SHARED:-$ROOT/../shared}"
BUILD="${1:-$ROOT/build/release}"
BIN="$("$SHARED/peers/llama-cpp.sh" --print)"
SRC="$(cd "$BIN/../.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

(cd "$SRC" && find . -name '*.md' -not -path './build/*' | LC_ALL=C sort | xargs cat) > "$TMP/all.txt"
head -c 1048576 "$TMP/all.txt" > "$TMP/corpus.txt"
echo "corpus: $(wc -c < "$TMP/corpus.txt") bytes"
printf '%-10s %10s %12s %12s %8s %12s %12s %6s\n' vocab tokens llama_ms fucina_ms speedup llama_cli_s fucina_cli_s ids
for v in qwen2 llama-spm llama-bpe; do
  vocab="$SHARED/vocab/ggml-vocab-$v.gguf"
  best=""
  for _ in 1 2 3; do
    ms=$("$BIN/test-tokenizer-0" "$vocab" "$TMP/corpus.txt" 2>&1 | sed -n 's/.*tokenized in \([0-9.]*\) ms.*/\1/p')
    if [[ -z "$best" ]] || awk "BEGIN{exit !($ms < $best)}"; then best=$ms; fi
  done
  ntok=$(wc -l < "$TMP/corpus.txt.tokcpp")
  name=${v//-/_}
  ours=$(FUCINA_TOKENIZER_CORPUS="$TMP/corpus.txt" FUCINA_SHARED="$SHARED" "$BUILD/bench/bench_tokenizer" \
           --benchmark_filter="encode/$name/" --benchmark_format=csv 2>/dev/null | tail -1 | cut -d, -f3)
  "$BUILD/fucina" tokenize "$vocab" -f "$TMP/corpus.txt" --no-bos --no-parse-special --no-escape \
    | tr -d '[],' | tr ' ' '\n' | sed '/^$/d' > "$TMP/ours.ids"
  if cmp -s "$TMP/ours.ids" "$TMP/corpus.txt.tokcpp"; then same=yes; else same=NO; fi
  t0=$(date +%s.%N)
  "$BIN/llama-tokenize" -m "$vocab" -f "$TMP/corpus.txt" --ids --log-disable --no-bos --no-parse-special --no-escape > /dev/null 2>&1
  t1=$(date +%s.%N)
  "$BUILD/fucina" tokenize "$vocab" -f "$TMP/corpus.txt" --no-bos --no-parse-special --no-escape > /dev/null
  t2=$(date +%s.%N)
  printf '%-10s %10s %12.1f %12.1f %7.1fx %12.2f %12.2f %6s\n' "$v" "$ntok" "$best" "$ours" \
    "$(awk "BEGIN{print $best/$ours}")" "$(awk "BEGIN{print $t1-$t0}")" "$(awk "BEGIN{print $t2-$t1}")" "$same"
done
