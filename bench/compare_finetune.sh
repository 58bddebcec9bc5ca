#!/usr/bin/env bash
# Training-step speed of `fucina finetune` next to its peers, in one run, 2 threads:
#  1. LoRA (r 8 on q,k,v,o, f32 base) on a ~13M-parameter llama (d 256, 6 layers, vocab 32000),
#     batch 8 x 256, against the same model in PyTorch 1.13 (bench/torch_llm_train_step.py);
#  2. the same on a Qwen3-0.6B-shaped model (f32 base, batch 1 x 256);
#  3. full fine-tuning of the small model against llama-finetune on the same f32 GGUF and text
#     (ctx 256, one sequence per step), and against PyTorch;
#  4. thread scaling (1 vs 2 threads) of fucina's full step, and peak RSS of LoRA on f32,
#     f16 and Q4_K bases of the 0.6B shape (no dequantized copy of a quantized base is made).
#
#   bench/compare_finetune.sh [--quick]      (--quick: skip the 0.6B shape)
#
# Needs the fucina CLI (FUCINA=, default build/release/fucina), llama-finetune
# (../shared/peers/llama-cpp.sh), /usr/bin/python3 with torch, ../shared/vocab. Prints one
# line per measurement; docs/BENCHMARK.md records a run.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
FUCINA=${FUCINA:-$here/build/release/fucina}
peers=${PEERS:-$HOME/.cache/fucina-peers/llama.cpp/build/bin}
vocab=$here/../shared/vocab
PY=/usr/bin/python3
quick=0
[[ ${1:-} == --quick ]] && quick=1
[[ -x $FUCINA ]] || { echo "compare_finetune.sh: $FUCINA not built" >&2; exit 2; }
[[ -x $peers/llama-finetune ]] || { echo "compare_finetune.sh: llama-finetune not found in $peers" >&2; exit 2; }

t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cat "$here"/docs/*.md "$here"/README.md > "$t/text.txt"   # ~100 KB of English for both sides
export OPENBLAS_CORETYPE=SkylakeX

# fucina's median tokens/s over steps 3.. of a run (steps 1-2 fault in memory, make state).
fucina_step() {  # ARGS...
  "$FUCINA" finetune "$@" 2>&1 | tee "$t/last.log" | awk '/^step [0-9]+\//{split($2,s,"/"); if (s[1] > 2) print $7}' |
    sort -n | awk '{v[NR]=$1} END {if (NR == 0) {print "nan"; exit} print v[int((NR + 1) / 2)]}'
}
peak_rss() {  # ARGS... -> MiB
  /usr/bin/time -f "%M" "$FUCINA" finetune "$@" 2>&1 >/dev/null | tail -1 | awk '{printf "%.0f", $1 / 1024}'
}

small=(--arch llama --hidden 256 --layers 6 --heads 8 --kv-heads 4 --head-dim 32 --ffn 768 --tied --ctx 512
       --rope-base 1000000 --vocab "$vocab/ggml-vocab-llama-spm.gguf")
"$FUCINA" synth "$t/small.gguf" "${small[@]}" >/dev/null 2>&1
torch_small=(--vocab 32000 --embd 256 --layers 6 --heads 8 --kv-heads 4 --head-dim 32 --ffn 768 --threads 2)

echo "== 1. LoRA r8 q,k,v,o, ~13M-param llama (d256 L6 V32000), batch 8x256, 2 threads"
tok=$(fucina_step "$t/small.gguf" --data "$t/text.txt" -o "$t/a.gguf" --lora --rank 8 --alpha 16 --ctx 256 --batch 8 --steps 8 -t 2)
echo "fucina: $tok tokens/s ($(awk -v x="$tok" 'BEGIN {printf "%.0f", 2048 / x * 1000}') ms/step)"
$PY "$here/bench/torch_llm_train_step.py" "${torch_small[@]}" --lora 8 --batch 8 --ctx 256

echo "== 3. full fine-tune, same model, 2 threads"
tok=$(fucina_step "$t/small.gguf" --data "$t/text.txt" -o "$t/f.gguf" --ctx 256 --batch 8 --steps 8 -t 2)
echo "fucina batch 8x256: $tok tokens/s"
$PY "$here/bench/torch_llm_train_step.py" "${torch_small[@]}" --batch 8 --ctx 256
tok1=$(fucina_step "$t/small.gguf" --data "$t/text.txt" -o "$t/f.gguf" --ctx 256 --batch 1 --steps 12 -t 2)
echo "fucina batch 1x256: $tok1 tokens/s ($(awk -v x="$tok1" 'BEGIN {printf "%.0f", 256 / x * 1000}') ms/step)"
head -c 24000 "$t/text.txt" > "$t/llama.txt"
start=$(date +%s.%N)
"$peers/llama-finetune" -m "$t/small.gguf" -f "$t/llama.txt" -c 256 -b 256 -ub 256 -t 2 --epochs 1 > "$t/lf.out" 2> "$t/lf.err" || true
end=$(date +%s.%N)
train_lines=$(tr '\r' '\n' < "$t/lf.err" | grep '^train:')
steps=$(echo "$train_lines" | tail -1 | grep -o 'data=[0-9]*/[0-9]*' | cut -d/ -f2 | sed 's/^0*//')
clock=$(echo "$train_lines" | tail -1 | grep -o 't=[0-9:]*' | cut -d= -f2)
secs=$(echo "$clock" | awk -F: '{print $1 * 3600 + $2 * 60 + $3}')
echo "llama-finetune (ctx 256, 1 sequence per step): $steps steps in $clock by its progress clock: $(awk -v s="$secs" -v n="$steps" 'BEGIN {printf "%.0f ms/step, %.0f tokens/s", s / n * 1000, n * 256 / s}') (wall incl. load and validation: $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}') s)"

echo "== 4. thread scaling, full step batch 8x256"
tok_1=$(fucina_step "$t/small.gguf" --data "$t/text.txt" -o "$t/f.gguf" --ctx 256 --batch 8 --steps 6 -t 1)
echo "fucina 1 thread: $tok_1 tokens/s; 2 threads: $tok tokens/s ($(awk -v a="$tok" -v b="$tok_1" 'BEGIN {printf "%.2f", a / b}')x)"

if ((quick == 0)); then
  echo "== 2. LoRA r8 q,k,v,o, Qwen3-0.6B shape, batch 1x256, 2 threads"
  q06=(--arch qwen3 --hidden 1024 --layers 28 --heads 16 --kv-heads 8 --head-dim 128 --ffn 3072 --tied --ctx 4096
       --rope-base 1000000 --vocab "$vocab/ggml-vocab-qwen2.gguf")
  "$FUCINA" synth "$t/q06.gguf" "${q06[@]}" --dtype f32 >/dev/null 2>&1
  tok=$(fucina_step "$t/q06.gguf" --data "$t/text.txt" -o "$t/a.gguf" --lora --rank 8 --alpha 16 --ctx 256 --batch 1 --steps 6 -t 2)
  echo "fucina f32 base: $tok tokens/s ($(awk -v x="$tok" 'BEGIN {printf "%.0f", 256 / x * 1000}') ms/step)"
  $PY "$here/bench/torch_llm_train_step.py" --vocab 151936 --embd 1024 --layers 28 --heads 16 --kv-heads 8 --head-dim 128 \
    --ffn 3072 --lora 8 --batch 1 --ctx 256 --threads 2 --reps 3
  echo "peak RSS, LoRA batch 1x256, 3 steps:"
  echo "  f32 base ($(du -m "$t/q06.gguf" | cut -f1) MiB file): $(peak_rss "$t/q06.gguf" --data "$t/text.txt" -o "$t/a.gguf" --lora --ctx 256 --steps 3 -t 2) MiB"
  "$FUCINA" quantize "$t/q06.gguf" "$t/q06-q4k.gguf" Q4_K_M >/dev/null 2>&1
  "$FUCINA" synth "$t/q06-f16.gguf" "${q06[@]}" --dtype f16 >/dev/null 2>&1
  rm "$t/q06.gguf"
  echo "  f16 base ($(du -m "$t/q06-f16.gguf" | cut -f1) MiB file): $(peak_rss "$t/q06-f16.gguf" --data "$t/text.txt" -o "$t/a.gguf" --lora --ctx 256 --steps 3 -t 2) MiB"
  echo "  Q4_K_M base ($(du -m "$t/q06-q4k.gguf" | cut -f1) MiB file): $(peak_rss "$t/q06-q4k.gguf" --data "$t/text.txt" -o "$t/a.gguf" --lora --ctx 256 --steps 3 -t 2) MiB"
  tok=$(fucina_step "$t/q06-q4k.gguf" --data "$t/text.txt" -o "$t/a.gguf" --lora --rank 8 --alpha 16 --ctx 256 --batch 1 --steps 6 -t 2)
  echo "fucina Q4_K_M base: $tok tokens/s"
fi
