#!/usr/bin/env bash
# Goldens for tests/tokenizer/bpe_trainer_test.cpp: `fucina vocab train` on
# tests/data/vocab/corpus.txt, then llama.cpp's llama-tokenize on validation.txt with that
# vocabulary; the ids (and the vocabulary's sha256) go to tests/data/vocab/goldens.json.
#   scripts/parity/make_vocab_goldens.sh [FUCINA]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
F=${1:-$here/build/release/fucina}
B=${PEERS:-$HOME/.cache/fucina-peers/llama.cpp/build/bin}
d=$here/tests/data/vocab
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
"$F" vocab train "$d/corpus.txt" --size 1024 -o "$t/v.gguf" 2>/dev/null
ids=$("$B/llama-tokenize" -m "$t/v.gguf" -f "$d/validation.txt" --ids --log-disable --no-parse-special 2>/dev/null | tail -1)
/usr/bin/python3 - "$t/v.gguf" "$ids" "$d/goldens.json" "$(bash "$here/scripts/parity/cpu_name.sh")" <<'PY'
import hashlib, json, sys, datetime, ast
vocab, ids, out, cpu = sys.argv[1:5]
json.dump({"made_by": "scripts/parity/make_vocab_goldens.sh", "made": str(datetime.date.today()), "cpu": cpu,
           "size": 1024, "vocab_sha256": hashlib.sha256(open(vocab, "rb").read()).hexdigest(),
           "llama_tokenize_ids": ast.literal_eval(ids)}, open(out, "w"), indent=1)
PY
echo "wrote $d/goldens.json"
