#!/usr/bin/env bash
# Session 35 (prepared, not run: no device was lent): the split step on the tensor cores with one
# order for every row (k_attention_tc.cu, MEMRA_CUDA_ATTN_TC=1, off by default until measured): keys
# (scores) and head dims (P.V) on the MMA's m side, the (row, head) pairs on n (one n-tile for decode
# rows, four for prefill blocks of 8 rows at 4 heads a KV head), so a decode row and a prompt row run
# the same kernel and the same chains; f16 and 8-bit caches. Decide from these rows: default on if
# decode at B = 1 / 16 / 64 is not slower and prefill at depth is faster (then the CUDA-core split
# kernel serves only the shapes the tensor-core one lacks). Main's merge now issues a thread's
# split loads 8 at a time (same arithmetic): the d32000 rows with the knob off show it.
# Usage (one device call a phase, each < 600 s):
#   bash bench/notes/experiments/2026-12-05-attention-tc2.sh 1   # GPU tests that cover attention
#   bash bench/notes/experiments/2026-12-05-attention-tc2.sh 2   # f16 cache, both kernels, round 1
#   bash bench/notes/experiments/2026-12-05-attention-tc2.sh 3   # round 2, the 8-bit cache, --verify-exact
#   bash bench/notes/experiments/2026-12-05-attention-tc2.sh 12  # the attention tests and round 1 in one call
# Carry: [".gpu/bundle.tar.xz", ".gpu/fx.tar.xz"] (scripts/gpu-bundle.sh build, then
# `tar cJf .gpu/fx.tar.xz .fixtures && rm -rf .fixtures`).
set -u
PHASE=${1:-1}
mkdir -p /tmp/g && [ -x /tmp/g/bin/memra ] || tar xJf .gpu/bundle.tar.xz -C /tmp/g
[ -d .fixtures ] || tar xJf .gpu/fx.tar.xz
export LD_LIBRARY_PATH=/tmp/g/lib MEMRA_FIXTURES_DIR=$PWD/.fixtures MEMRA_GPU_TEST_DIR=/tmp/gt
mkdir -p /tmp/gt
X=/tmp/g/bin/memra
M=/tmp/9b.gguf
[ "$PHASE" = 1 ] || [ -f $M ] || $X synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1 || echo "synth failed"
row() { grep -E '^\| [^-]' | grep -v '| model |' | cut -d'|' -f5-10; }
f16_round() {  # each configuration with the knob off, then on, so a call cut short still compares
  for v in 0 1; do echo "r$1 f16 pp512 MEMRA_CUDA_ATTN_TC=$v:"
    MEMRA_CUDA_ATTN_TC=$v timeout 150 $X bench -m $M --device cuda -p 512 -n 0 -d 0,4096,16384 -r 3 --ctx 20000 2>/dev/null | row; done
  for v in 0 1; do echo "r$1 f16 tg32 MEMRA_CUDA_ATTN_TC=$v:"
    MEMRA_CUDA_ATTN_TC=$v timeout 150 $X bench -m $M --device cuda -p 0 -n 32 -b 1,16,64 -d 512,4096 -r 2 --ctx 8192 2>/dev/null | row; done
  for v in 0 1; do echo "r$1 f16 tg32 d32000 MEMRA_CUDA_ATTN_TC=$v:"
    MEMRA_CUDA_ATTN_TC=$v timeout 100 $X bench -m $M --device cuda -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 33000 2>/dev/null | row; done
}
{
nvidia-smi --query-gpu=name --format=csv,noheader; $X --version
case "$PHASE" in
1)
  echo "== tests, MEMRA_CUDA_ATTN_TC=1 (the attention tests run both kernels whatever the knob)"
  MEMRA_CUDA_ATTN_TC=1 timeout 420 /tmp/g/bin/memra_tests \
    --gtest_filter='GpuOps.Attention:GpuAttention*:GpuPrefixCache*:GpuModel.TinyFixtures*:GpuModel.BatchedDecode*:GpuModel.GreedyDecode*' 2>&1 |
    grep -E '^  attention|positions|OK \]|FAILED|Failure|differ|us a|depth' | head -90
  echo "== GpuAttentionPerf, MEMRA_CUDA_ATTN_TC=0 (the run above had it on)"
  MEMRA_CUDA_ATTN_TC=0 timeout 120 /tmp/g/bin/memra_tests --gtest_filter='GpuAttentionPerf*' 2>&1 |
    grep -E 'us a|depth|OK \]|FAILED' | head -20 ;;
2) f16_round 1 ;;
s)
  # one short call (what was left of a session's device time): decode, the tests, prefill at depth
  for v in 0 1; do echo "f16 tg32 d4096 MEMRA_CUDA_ATTN_TC=$v:"
    MEMRA_CUDA_ATTN_TC=$v timeout 100 $X bench -m $M --device cuda -p 0 -n 32 -b 1,16,64 -d 4096 -r 2 --ctx 8192 2>/dev/null | row; done
  MEMRA_CUDA_ATTN_TC=1 timeout 150 /tmp/g/bin/memra_tests \
    --gtest_filter='GpuOps.Attention:GpuAttention*:GpuPrefixCache*:GpuModel.TinyFixtures*-GpuAttentionPerf*' 2>&1 |
    grep -E 'positions|OK \]|FAILED|Failure|differ' | head -60
  for v in 0 1; do echo "f16 pp512 MEMRA_CUDA_ATTN_TC=$v:"
    MEMRA_CUDA_ATTN_TC=$v timeout 60 $X bench -m $M --device cuda -p 512 -n 0 -d 0,16384 -r 2 --ctx 17000 2>/dev/null | row; done
  for v in 0 1; do echo "f16 tg32 d32000 MEMRA_CUDA_ATTN_TC=$v:"
    MEMRA_CUDA_ATTN_TC=$v timeout 60 $X bench -m $M --device cuda -p 0 -n 32 -b 1 -d 32000 -r 1 --ctx 33000 2>/dev/null | row; done ;;
12)
  # phases 1 and 2 in one call (a refused start costs up to 3 minutes): the attention tests with the knob on, then round 1
  MEMRA_CUDA_ATTN_TC=1 timeout 200 /tmp/g/bin/memra_tests \
    --gtest_filter='GpuOps.Attention:GpuAttention*:GpuPrefixCache*:GpuModel.TinyFixtures*:GpuModel.BatchedDecode*-GpuAttentionPerf*' 2>&1 |
    grep -E 'positions|OK \]|FAILED|Failure|differ' | head -60
  f16_round 1 ;;
3)
  f16_round 2
  for v in 0 1; do
    echo "q8_0 cache MEMRA_CUDA_ATTN_TC=$v:"
    MEMRA_CUDA_KV=q8_0 MEMRA_CUDA_ATTN_TC=$v timeout 120 $X bench -m $M --device cuda -p 512 -n 0 -d 16384 -r 2 --ctx 20000 2>/dev/null | row
    MEMRA_CUDA_KV=q8_0 MEMRA_CUDA_ATTN_TC=$v timeout 120 $X bench -m $M --device cuda -p 0 -n 32 -b 1,64 -d 4096 -r 2 --ctx 8192 2>/dev/null | row
    MEMRA_CUDA_KV=q8_0 MEMRA_CUDA_ATTN_TC=$v timeout 100 $X bench -m $M --device cuda -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 33000 2>/dev/null | row
  done
  for kv in f16 q8_0; do
    echo -n "verify-exact B=16,64 d4096 kv=$kv TC=1: "
    MEMRA_CUDA_KV=$kv MEMRA_CUDA_ATTN_TC=1 timeout 150 $X bench -m $M --device cuda -p 0 -n 32 -b 16,64 -d 4096 -r 1 --ctx 8192 --verify-exact 2>&1 | grep -E 'differ' | tr '\n' ' '
    echo
  done ;;
esac
} 2>&1 | tee $OUT/attention-tc2-phase$PHASE.log
