#!/usr/bin/env bash
# Session 35 (prepared, not run: no device was lent): the split step on the tensor cores with one
# order for every row (k_attention_tc.cu, MEMRA_CUDA_ATTN_TC=1, off by default until measured): keys
# (scores) and head dims (P.V) on the MMA's m side, the (row, head) pairs on n (one n-tile for decode
# rows, four for prefill blocks of 8 rows at 4 heads a KV head), so a decode row and a prompt row run
# the same kernel and the same chains. Decide from these rows: default on (and delete the CUDA-core
# split kernel's f16 path) if decode at B = 1 / 16 / 64 is not slower and prefill at depth is faster.
# Phase 1: the GPU tests that cover attention with the knob on, then bench round 1 (both values).
# Phase 2: bench round 2, --verify-exact, GpuAttentionPerf both ways.
# Carry: [".gpu/bundle.tar.xz", ".gpu/fx.tar.xz"] (bundle of the build with the knob).
set -u
PHASE=${1:-1}
mkdir -p /tmp/g && [ -x /tmp/g/bin/memra ] || tar xJf .gpu/bundle.tar.xz -C /tmp/g
[ -d .fixtures ] || tar xJf .gpu/fx.tar.xz
export LD_LIBRARY_PATH=/tmp/g/lib MEMRA_FIXTURES_DIR=$PWD/.fixtures MEMRA_GPU_TEST_DIR=/tmp/gt
mkdir -p /tmp/gt
X=/tmp/g/bin/memra
M=/tmp/9b.gguf
[ -f $M ] || $X synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1 || echo "synth failed"
bench_round() {
  for v in 0 1; do
    echo "r$1 MEMRA_CUDA_ATTN_TC=$v:"
    MEMRA_CUDA_ATTN_TC=$v timeout 150 $X bench -m $M --device cuda -p 512 -n 0 -d 0,4096,16384 -r 3 --ctx 20000 2>/dev/null | grep pp512 | cut -d'|' -f5-10
    MEMRA_CUDA_ATTN_TC=$v timeout 150 $X bench -m $M --device cuda -p 0 -n 32 -b 1,16,64 -d 512,4096 -r 2 --ctx 8192 2>/dev/null | grep tg | cut -d'|' -f5-10
    MEMRA_CUDA_ATTN_TC=$v timeout 100 $X bench -m $M --device cuda -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 33000 2>/dev/null | grep tg | cut -d'|' -f5-10
  done
}
{
nvidia-smi --query-gpu=name --format=csv,noheader; $X --version
if [ "$PHASE" = 1 ]; then
  echo "== tests MEMRA_CUDA_ATTN_TC=1 (the attention tests run both kernels whatever the knob)"
  MEMRA_CUDA_ATTN_TC=1 timeout 300 /tmp/g/bin/memra_tests \
    --gtest_filter='GpuOps.Attention:GpuAttention*:GpuPrefixCache*:GpuModel.TinyFixtures*:GpuModel.BatchedDecode*:GpuModel.GreedyDecode*' 2>&1 |
    grep -E '^  attention|positions|OK \]|FAILED|Failure|differ|us a layer|depth' | head -70
  bench_round 1
else
  bench_round 2
  for v in 0 1; do
    for b in 16 64; do
      echo -n "verify-exact B=$b d4096 TC2=$v: "
      MEMRA_CUDA_ATTN_TC=$v timeout 120 $X bench -m $M --device cuda -p 0 -n 32 -b $b -d 4096 -r 1 --ctx 8192 --verify-exact 2>&1 | grep -E 'differ'
    done
  done
fi
} 2>&1 | tee $OUT/attention-tc2-phase$PHASE.log
