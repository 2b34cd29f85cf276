#!/usr/bin/env bash
# Ran on 2026-12-05 (bench/results/2026-12-05-1310-h200-session31.md); MEMRA_CUDA_STREAM_GROUPED measured
# slower there and is deleted (bench/notes/experiments/2026-12-05-stream-grouped.patch).
# Device call of session 31: main (the order before the offset codes, lane copies without an L2
# policy, IQ4_NL / IQ4_XS, MEMRA_CUDA_STREAM_GROUPED) against .gpu/main0.xz (d924ea6: the same
# order, every weight copy evict_first), then the grouped streaming matmul on 35B-A3B.
#   bash bench/notes/experiments/2026-12-05-s31-check.sh   carry [".gpu/bundle.tar.xz", ".gpu/main0.xz"]
# (~6 minutes). 1. 9B Q4_0: decode + prefill logits main vs main0 (must be identical: a cache policy
# changes no value), tg32 B = 1 / 16 / 64 @ d512 + pp512, two rounds each, --verify-exact B = 16 / 64,
# the B = 64 per-op profile (never taken before). 2. 35B-A3B Q4_0:
# MEMRA_CUDA_STREAM_GROUPED=0 vs 1 decode logits (must be identical), tg128 B = 1 two rounds each,
# --verify-exact B = 1 / 4 / 16 with it on, the B = 1 per-op profile with it on and off. 3. The
# matmul and MoE GPU tests.
set -u
mkdir -p /tmp/g /tmp/o && tar xJf .gpu/bundle.tar.xz -C /tmp/g
[ -f .gpu/main0.xz ] && xz -dc .gpu/main0.xz > /tmp/o/main0 && chmod +x /tmp/o/main0
export LD_LIBRARY_PATH=/tmp/g/lib
N=/tmp/g/bin/memra O=/tmp/o/main0 M=/tmp/9b-q4_0.gguf E=/tmp/35b-q4_0.gguf
row() { grep -E 'tg32|tg128|pp512' | cut -d'|' -f5,6,7 | tr '\n' ' '; echo; }
{
$N --version; nvidia-smi --query-gpu=name --format=csv,noheader
$N synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1 || echo "synth failed"
if [ -x $O ]; then
  for mode in decode prefill; do
    $N logits -m $M --device cuda --ids "$(seq -s, 100 400)" --mode $mode -o /tmp/l-n.bin 2>&1 | grep -v wrote
    $O logits -m $M --device cuda --ids "$(seq -s, 100 400)" --mode $mode -o /tmp/l-o.bin 2>&1 | grep -v wrote
    echo -n "logits $mode main vs main0: "; cmp /tmp/l-n.bin /tmp/l-o.bin && echo identical
  done
fi
for r in 1 2; do
  for b in "main $N" "main0 $O"; do
    set -- $b
    [ -x "$2" ] || continue
    echo -n "r$r $1: "; $2 bench -m $M --device cuda -p 512 -n 32 -b 1,16,64 -d 512 -r 2 2>/dev/null | row
  done
done
$N bench -m $M --device cuda -n 32 -b 16,64 -d 512 -r 1 --verify-exact 2>&1 | grep -E 'verify-exact|error|differ'
MEMRA_CUDA_PROFILE=1 $N bench -m $M --device cuda -p 0 -n 16 -b 64 -d 512 -r 1 --ctx 8192 2>&1 |
  grep -A40 cuda-profile > $OUT/profile-b64.txt
rm -f $M
$N synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $E >/dev/null 2>&1 || echo "moe synth failed"
$N logits -m $E --device cuda --ids "$(seq -s, 100 300)" --mode decode -o /tmp/m-0.bin 2>&1 | grep -v wrote
MEMRA_CUDA_STREAM_GROUPED=1 $N logits -m $E --device cuda --ids "$(seq -s, 100 300)" --mode decode -o /tmp/m-1.bin 2>&1 | grep -v wrote
echo -n "35B logits decode stream-grouped 0 vs 1: "; cmp /tmp/m-0.bin /tmp/m-1.bin && echo identical
for r in 1 2; do
  for s in 0 1; do
    echo -n "r$r 35B stream-grouped=$s: "
    MEMRA_CUDA_STREAM_GROUPED=$s $N bench -m $E --device cuda -p 0 -n 128 -r 3 2>/dev/null | row
  done
done
MEMRA_CUDA_STREAM_GROUPED=1 $N bench -m $E --device cuda -p 0 -n 32 -b 1,4,16 -d 512 -r 1 --verify-exact 2>&1 |
  grep -E 'verify-exact|error|differ|tg32' | cut -c1-160
for s in 0 1; do
  MEMRA_CUDA_STREAM_GROUPED=$s MEMRA_CUDA_PROFILE=1 $N bench -m $E --device cuda -p 0 -n 16 -r 1 2>&1 |
    grep -A24 cuda-profile > $OUT/moe-profile-b1-sg$s.txt
done
/tmp/g/bin/memra_tests --gtest_brief=1 --gtest_filter='GpuMoe.*:GpuOps.Moe:GpuMatmul*:GpuOps.Matmul' 2>&1 | tail -25
} 2>&1 | tee $OUT/s31-check.log
