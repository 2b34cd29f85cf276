#!/usr/bin/env bash
# Ran in session 37 on an H100 (bench/results/2026-12-06-0410-h100-session37.md); the change it measured is on main,
# the getenv it used for O1 is not (O1 = main b61fea9's kernel).
# Session 37: the tensor-core split step (MEMRA_CUDA_ATTN_TC=1, k_attention_tc.cu) measured against
# the CUDA-core one, and its one-n-tile (decode) launches with V staged in shared memory by cp.async
# at the kernel's start (same values, so the same bits: the cut-invariance test compares a staged
# decode row with the same row in a 4-n-tile prefill block bit for bit) against main's V loads into
# registers after the scores. X = the build with V staged, O = the same binary with the experiment's
# MEMRA_X_TC_NO_SV=1 (main's V loads; an uncommitted getenv in launch_tc_hd: a second memra did not
# fit the 64 MiB beside the fixtures). Prefill rows (4 n-tiles) run the same code in both.
# Build: `cmake --build build && scripts/gpu-bundle.sh build && tar cJf .gpu/fx.tar.xz .fixtures && rm -rf .fixtures`.
# Carry [".gpu/bundle.tar.xz", ".gpu/fx.tar.xz"]. One call a phase (< 600 s):
#   a: the attention tests with the knob on, then decode d4096 B = 1 / 16 / 64 (X off, X on, O on),
#      B = 1 at d32000 (the same three), pp512 at d0 / 4096 / 16384 (X off, X on)
#   b: round 2 of a's rows, the 8-bit cache (X off / on, O on), --verify-exact with the knob on
set -u
PHASE=${1:-a}
mkdir -p /tmp/g && { [ -x /tmp/g/bin/memra ] || tar xJf .gpu/bundle.tar.xz -C /tmp/g; }
[ -d .fixtures ] || tar xJf .gpu/fx.tar.xz
export LD_LIBRARY_PATH=/tmp/g/lib MEMRA_FIXTURES_DIR=$PWD/.fixtures MEMRA_GPU_TEST_DIR=/tmp/gt
mkdir -p /tmp/gt
X=/tmp/g/bin/memra
M=/tmp/9b.gguf
[ -f $M ] || $X synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1 || echo "synth failed"
row() { grep -E '^\| [^-]' | grep -v '| model |' | cut -d'|' -f5-10; }
{
nvidia-smi --query-gpu=name --format=csv,noheader; $X --version
# tg CFG ARGS..: CFG = X0 (knob off), X1 (on, V staged), O1 (on, V into registers as on main)
nosv() { [ "${1:0:1}" = O ] && echo 1; }
tg() { local c=$1; shift
  MEMRA_X_TC_NO_SV=$(nosv $c) MEMRA_CUDA_ATTN_TC=${c:1:1} timeout 150 $X bench -m $M --device cuda "$@" 2>/dev/null | row; }
round() {
  for c in X0 X1 O1; do echo "r$1 tg32 d4096 $c:"; tg $c -p 0 -n 32 -b 1,16,64 -d 4096 -r 2 --ctx 8192; done
  for c in X0 X1 O1; do echo "r$1 tg32 d32000 $c:"; tg $c -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 33000; done
  for c in X0 X1; do echo "r$1 pp512 $c:"; tg $c -p 512 -n 0 -d 0,4096,16384 -r 3 --ctx 17000; done
}
same_bits() {  # decode logits of 601 ids (5 splits deep) from X and O with the knob on
  local ids; ids=$(seq -s, 100 700)
  for b in X O; do MEMRA_X_TC_NO_SV=$(nosv $b) MEMRA_CUDA_ATTN_TC=1 $X logits -m $M --device cuda --ids $ids --mode decode -o /tmp/l-$b.bin 2>/dev/null; done
  echo -n "decode logits X1 vs O1 ($*): "; cmp /tmp/l-X.bin /tmp/l-O.bin && echo identical
}
case "$PHASE" in
a)
  same_bits f16
  MEMRA_CUDA_ATTN_TC=1 timeout 200 /tmp/g/bin/memra_tests \
    --gtest_filter='GpuOps.Attention:GpuAttention*:GpuPrefixCache*:GpuModel.TinyFixtures*:GpuModel.BatchedDecode*-GpuAttentionPerf*' 2>&1 |
    grep -E 'positions|OK \]|FAILED|Failure|differ' | head -60
  round 1 ;;
q)  # the 8-bit rows of b alone (its first run aborted: the staged 8-bit launch lacked the shared-memory opt-in)
  MEMRA_CUDA_KV=q8_0 same_bits q8_0
  for c in X1 O1; do echo "q8_0 cache $c:"
    MEMRA_CUDA_KV=q8_0 tg $c -p 0 -n 32 -b 1,64 -d 4096 -r 2 --ctx 8192
    MEMRA_CUDA_KV=q8_0 tg $c -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 33000; done
  echo "q8_0 cache pp512 d16384 X1:"; MEMRA_CUDA_KV=q8_0 tg X1 -p 512 -n 0 -d 16384 -r 2 --ctx 17000
  echo -n "verify-exact B=16,64 d4096 kv=q8_0 X1: "
  MEMRA_CUDA_KV=q8_0 MEMRA_CUDA_ATTN_TC=1 timeout 150 $X bench -m $M --device cuda -p 0 -n 32 -b 16,64 -d 4096 -r 1 --ctx 8192 --verify-exact 2>&1 | grep -E 'differ' | tr '\n' ' '
  echo
  MEMRA_CUDA_ATTN_TC=1 timeout 100 /tmp/g/bin/memra_tests --gtest_filter='GpuAttentionCutInvariance*:GpuAttentionQ8Cache*' 2>&1 | grep -E 'OK \]|FAILED|Failure' ;;
b)
  MEMRA_CUDA_KV=q8_0 same_bits q8_0
  round 2
  for c in X0 X1 O1; do echo "q8_0 cache $c:"
    MEMRA_CUDA_KV=q8_0 tg $c -p 0 -n 32 -b 1,64 -d 4096 -r 2 --ctx 8192
    MEMRA_CUDA_KV=q8_0 tg $c -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 33000; done
  for c in X0 X1; do echo "q8_0 cache pp512 d16384 $c:"; MEMRA_CUDA_KV=q8_0 tg $c -p 512 -n 0 -d 16384 -r 2 --ctx 17000; done
  for kv in f16 q8_0; do
    echo -n "verify-exact B=16,64 d4096 kv=$kv X1: "
    MEMRA_CUDA_KV=$kv MEMRA_CUDA_ATTN_TC=1 timeout 150 $X bench -m $M --device cuda -p 0 -n 32 -b 16,64 -d 4096 -r 1 --ctx 8192 --verify-exact 2>&1 | grep -E 'differ' | tr '\n' ' '
    echo
  done ;;
esac
} 2>&1 | tee $OUT/attention-tc3-phase$PHASE.log
