#!/usr/bin/env bash
# --moe-stream benchmark (not CI): a synthetic qwen3moe (Qwen3-30B-A3B's expert shape: 128
# experts of 768, 8 used, hidden 2048; f16 attention, Q4_K experts) whose experts exceed the
# address-space limit, decoded by `fucina bench --moe-stream` under that limit (RLIMIT_AS,
# prlimit) at several cache sizes; the disk's read bandwidth (O_DIRECT, 4 MiB sequential and
# expert-sized random reads); llama.cpp's llama-bench on the same file under the same limit
# (mmap and -lm none), and with LLAMA_UNLIMITED=1 without one. Peak RSS from
# /usr/bin/time. The model is written to DIR and deleted on exit, whatever happens.
#   bench/moe_stream.sh FUCINA [LLAMA_BIN_DIR]
# env: DIR (/tmp/fucina_moe_stream), LAYERS (32: ~11 GB of experts), LIMIT_GB (8),
#      CACHES ("512 2048 4096" MiB), N (16 generated tokens), THREADS (2), LLAMA_UNLIMITED (0)
set -euo pipefail
fucina=$1 llama=${2:-}
dir=${DIR:-/tmp/fucina_moe_stream} layers=${LAYERS:-32} limit_gb=${LIMIT_GB:-8}
caches=${CACHES:-"512 2048 4096"} n=${N:-16} threads=${THREADS:-2}
mkdir -p "$dir"
model=$dir/moe_q4k.gguf
trap 'rm -f "$model"' EXIT
limit=$((limit_gb << 30))

echo "== $(date -u +%FT%TZ), load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM"
t0=$(date +%s)
"$fucina" synth "$model" --arch qwen3moe --hidden 2048 --layers "$layers" --heads 32 --kv-heads 4 --head-dim 128 \
  --ffn 6144 --experts 128 --experts-used 8 --expert-ffn 768 --ctx 4096 --dtype f16 --q4k-experts
echo "synth: $(( $(date +%s) - t0 )) s, $(du -BM "$model" | cut -f1) on disk; limit: RLIMIT_AS $limit_gb GiB"

# Disk read bandwidth, past the page cache.
seq_mbs=$(dd if="$model" of=/dev/null bs=4M count=1024 skip=256 iflag=direct 2>&1 | grep -o '[0-9.]* [MG]B/s')
expert=$((3 * 2048 * 768 / 256 * 144))  # one expert's Q4_K bytes
size=$(stat -c %s "$model")
rnd_start=$(date +%s.%N)
for i in $(seq 1 200); do
  dd if="$model" of=/dev/null bs=$expert count=1 skip=$(( (RANDOM * 32768 + RANDOM) % (size / expert - 1) )) iflag=direct 2>/dev/null
done
rnd_s=$(echo "$(date +%s.%N) - $rnd_start" | bc)
echo "disk: sequential $seq_mbs; random expert-sized reads $(echo "200 * $expert / $rnd_s / 1048576" | bc) MiB/s"

bench() {  # label, then the command; prints tokens/s and peak RSS
  local label=$1; shift
  local out
  out=$( { /usr/bin/time -f 'peak_rss_kb %M' "$@" -p 0 -n "$n" -r 1 -t "$threads" 2>&1; } || true)
  local tps rss
  tps=$(grep -o '| *tg'"$n"' *| *[0-9.]* ± [0-9.]*' <<<"$out" | grep -o '[0-9.]* ±' | tr -d ' ±' || true)
  rss=$(grep -o 'peak_rss_kb [0-9]*' <<<"$out" | grep -o '[0-9]*$')
  echo "$label: ${tps:-failed} tok/s, peak RSS $((rss / 1024)) MiB"
  grep -E 'moe-stream:|error|failed' <<<"$out" | head -3 | sed 's/^/    /' || true
}
for c in $caches; do
  bench "fucina --moe-stream --moe-cache $c (RLIMIT_AS $limit_gb GiB)" prlimit --as=$limit "$fucina" bench "$model" --moe-stream --moe-cache "$c"
done
bench "fucina resident (RLIMIT_AS $limit_gb GiB)" prlimit --as=$limit "$fucina" bench "$model"
if [[ -n $llama ]]; then
  export LD_LIBRARY_PATH=$llama${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  bench "llama.cpp (RLIMIT_AS $limit_gb GiB)" prlimit --as=$limit "$llama/llama-bench" -m "$model"
  bench "llama.cpp --no-mmap (RLIMIT_AS $limit_gb GiB)" prlimit --as=$limit "$llama/llama-bench" -m "$model" -lm none
  # Opt-in: llama.cpp repacks the Q4_K experts into anonymous memory, so unlimited it holds
  # the whole model (17.6 GB RSS after 11 minutes on the 23 GiB dev VM, not done).
  if [[ ${LLAMA_UNLIMITED:-0} == 1 ]]; then bench "llama.cpp (no limit, mmap)" "$llama/llama-bench" -m "$model"; fi
fi
echo "== done, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
