#!/usr/bin/env bash
# Speculative decoding (Note [Speculative decoding]) side by side: fucina run --spec off,
# fucina run --spec lookup and llama.cpp's llama-lookup (n-gram drafts from the context) on
# the same prompts and model, runs interleaved so drift in machine load hits all alike.
# Prints decode tokens/s per task and engine (mean over rounds), spec/plain, and the
# acceptance counts.
#
#   bench/compare_spec.sh [-n 128] [-t 2] [--rounds 3] [--draft-max 16] [--passage FILE] MODEL.gguf
#
# Tasks. A random-weight model does not copy text it was shown the way a trained one does,
# so the copy tasks are built from the model's own greedy output G (of a seed text S, 192
# tokens), which a bench model made to follow mostly its last tokens reproduces when it meets
# S again, with a few tokens changed by the longer context (small edits). docs/BENCHMARK.md
# uses Qwen3-0.6B's shape with small matrix weights (the blocks perturb the embedding path
# little), quantized:
#   fucina synth bench.gguf --arch qwen3 --hidden 1024 --layers 28 --heads 16 --kv-heads 8 \
#     --head-dim 128 --ffn 3072 --ctx 4096 --dtype f16 --std 0.002 --vocab ggml-vocab-qwen2.gguf
#   fucina quantize bench.gguf bench-q4_k_m.gguf q4_k_m
#   copy      S G S          greedy: re-emit the passage G given in the prompt
#   continue  S G S G[:~1/2] greedy: continue a document where its text repeats (cut at a space)
#   free      S              temperature 1, seed 42: text that does not repeat
#   passage   P P[:~1/8]     with --passage FILE (a trained model; its first ~800 bytes, cut
#                            after a sentence): greedy, the passage given again from its start
# Each task generates -n tokens or fewer: prompt + n + draft-max + 1 must fit the model's
# context, since llama-lookup does not stop at the context's end (its decodes fail there and
# it goes on counting tokens and drafts, fast and wrong); the table gives each task's n, and
# a llama-lookup run that still logs a failed decode is flagged.
# The load average (uptime) is printed before and after: on a shared machine it is part of
# the result.
# Needs llama-lookup (LLAMA_LOOKUP=, default the peer build) and the fucina CLI (FUCINA=).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
FUCINA=${FUCINA:-$here/build/release/fucina}
LLAMA_LOOKUP=${LLAMA_LOOKUP:-$HOME/.cache/fucina-peers/llama.cpp/build/bin/llama-lookup}
PY=${PY:-/usr/bin/python3}

n=128 threads=2 rounds=3 draft_max=16 model= passage=
while (($#)); do
  case $1 in
    -n) n=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --draft-max) draft_max=$2; shift 2 ;;
    --passage) passage=$2; shift 2 ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    -*) echo "compare_spec.sh: unknown option $1" >&2; exit 2 ;;
    *) model=$1; shift ;;
  esac
done
[[ -n $model && -f $model ]] || { echo "compare_spec.sh: give a model file (got '${model}')" >&2; exit 2; }
[[ -z $passage || -f $passage ]] || { echo "compare_spec.sh: no passage file '$passage'" >&2; exit 2; }
[[ -x $FUCINA ]] || { echo "compare_spec.sh: $FUCINA not built (cmake --build build/release --target fucina)" >&2; exit 2; }
[[ -x $LLAMA_LOOKUP ]] || { echo "compare_spec.sh: llama-lookup not found at $LLAMA_LOOKUP" >&2; exit 2; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
seed_text="The history of the city begins with a small settlement on the river, where traders"
printf '%s' "$seed_text" >"$out/seed.txt"
"$FUCINA" run "$model" -f "$out/seed.txt" -n 192 --temp 0 --spec off -t "$threads" >"$out/g.txt" 2>/dev/null
"$PY" - "$out" <<'EOF'
import sys, os
d = sys.argv[1]
s, g = open(f"{d}/seed.txt", "rb").read(), open(f"{d}/g.txt", "rb").read()  # a random model's text need not be UTF-8
open(f"{d}/copy.txt", "wb").write(s + g + b"\n\n" + s)
half = g.find(b" ", len(g) // 2)  # cut between words: a cut inside a character starts other tokens
open(f"{d}/continue.txt", "wb").write(s + g + b"\n\n" + s + g[: half if half > 0 else len(g) // 2])
open(f"{d}/free.txt", "wb").write(s)
EOF
tasks="copy continue free"
if [[ -n $passage ]]; then
  "$PY" - "$out" "$passage" <<'EOF'
import sys
d, t = sys.argv[1], open(sys.argv[2], "rb").read()
p = t[: t.find(b". ", 700) + 1]  # about 800 bytes, ending a sentence
head = p.find(b" ", len(p) // 8)
open(f"{d}/passage.txt", "wb").write(p + b"\n\n" + p[:head])
EOF
  tasks+=" passage"
fi

# task -> tokens to generate: -n, or fewer where the prompt and the drafts would overrun the context
declare -A task_n
for task in $tasks; do
  head=$("$FUCINA" run "$model" -f "$out/$task.txt" -n 1 --temp 0 --spec off -t "$threads" 2>&1 >/dev/null)
  ctx=$(sed -nE 's/.*, ctx ([0-9]+),.*/\1/p' <<<"$head")
  prompt=$(sed -nE 's/.*prompt ([0-9]+) tokens.*/\1/p' <<<"$head")
  task_n[$task]=$(( n < ctx - prompt - draft_max - 1 ? n : ctx - prompt - draft_max - 1 ))
  ((task_n[$task] > 0)) || { echo "compare_spec.sh: $task's prompt ($prompt tokens) leaves no room in the context ($ctx)" >&2; exit 2; }
  echo "$task: prompt $prompt tokens, context $ctx: -n ${task_n[$task]}"
done

echo "load before: $(uptime)"  # the machine may be shared: the load is part of the result
# task -> sampling flags (the same for both engines)
declare -A sampling=([copy]="--temp 0" [continue]="--temp 0" [passage]="--temp 0"
                     [free]="--temp 1 --top-k 40 --top-p 0.95 --min-p 0.05 --seed 42")
for ((r = 0; r < rounds; ++r)); do
  for task in $tasks; do
    for spec in off lookup; do
      echo "== round $((r + 1))/$rounds $task fucina --spec $spec" >&2
      # shellcheck disable=SC2086
      "$FUCINA" run "$model" -f "$out/$task.txt" -n "${task_n[$task]}" ${sampling[$task]} --spec "$spec" --draft-max "$draft_max" \
        -t "$threads" --ignore-eos >"$out/f.$task.$spec.$r.out" 2>"$out/f.$task.$spec.$r.err"
    done
    echo "== round $((r + 1))/$rounds $task llama-lookup" >&2
    # shellcheck disable=SC2086
    "$LLAMA_LOOKUP" -m "$model" -f "$out/$task.txt" -n "${task_n[$task]}" ${sampling[$task]} --spec-draft-n-max "$draft_max" \
      -t "$threads" --ignore-eos >"$out/l.$task.$r.out" 2>"$out/l.$task.$r.err" </dev/null
  done
done

echo "load after:  $(uptime)"
task_args=()
for task in $tasks; do task_args+=("$task:${task_n[$task]}"); done
"$PY" - "$out" "$rounds" "${task_args[@]}" <<'EOF'
import re, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
tasks = [a.split(":")[0] for a in sys.argv[3:]]
task_n = dict(a.split(":") for a in sys.argv[3:])
def fucina(task, spec, r):
    t = open(f"{d}/f.{task}.{spec}.{r}.err").read()
    tps = float(re.search(r"generated \d+ tokens in [\d.]+ ms \(([\d.]+) tok/s\)", t).group(1))
    m = re.search(r"speculative: (\d+) verifications, (\d+) of (\d+) drafted", t)
    return tps, (m.group(2), m.group(3)) if m else ("0", "0")
def lookup(task, r):
    t = open(f"{d}/l.{task}.{r}.err", errors="replace").read()
    m = re.search(r"decoded\s+\d+ tokens in\s+[\d.]+ seconds, speed:\s+([\d.]+) t/s", t)
    if not m:  # a failed run: its log kept, the round left out
        keep = f"/tmp/compare_spec.l.{task}.{r}.err"
        open(keep, "w").write(t)
        print(f"llama-lookup {task} round {r + 1}: no speed line (log: {keep})")
        return None
    if "failed to decode" in t:  # ran past the context: its speed and counts are not a run's
        print(f"llama-lookup {task} round {r + 1}: failed decodes (context overrun), round left out")
        return None
    return float(m.group(1)), (re.search(r"n_accept\s+=\s+(\d+)", t).group(1), re.search(r"n_drafted\s+=\s+(\d+)", t).group(1))
print("| task | n | fucina plain t/s | fucina spec t/s | spec/plain | accepted/drafted | llama-lookup t/s | accepted/drafted | fucina spec/llama-lookup |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for task in tasks:
    plain = statistics.mean(fucina(task, "off", r)[0] for r in range(rounds))
    spec = statistics.mean(fucina(task, "lookup", r)[0] for r in range(rounds))
    acc = fucina(task, "lookup", 0)[1]
    runs = [x for x in (lookup(task, r) for r in range(rounds)) if x]
    ll = statistics.mean(x[0] for x in runs) if runs else float("nan")
    lacc = runs[0][1] if runs else ("-", "-")
    print(f"| {task} | {task_n[task]} | {plain:.2f} | {spec:.2f} | {spec / plain:.2f}x | {acc[0]}/{acc[1]} | {ll:.2f} | {lacc[0]}/{lacc[1]} | {spec / ll:.2f}x |")
same = all(open(f"{d}/f.{t}.off.{r}.out", "rb").read() == open(f"{d}/f.{t}.lookup.{r}.out", "rb").read()
           for t in tasks for r in range(rounds))
print(f"\nfucina --spec lookup output identical to --spec off on every task and round: {same}")
EOF
