#!/usr/bin/env bash
# Prepared in session 34; measured the same session (H100, bench/results/2026-12-05-1932-h100-s34-
# attention-tc-all-rows.log): every test passes with it, prefill == token-by-token logits bit for bit
# on the fixtures, but decode loses (d4096 B = 1 -5%, B = 16 -17%, B = 64 -23%) and prefill at depth
# gains only +7% / +8% (d4096 / d16384): not landed. Every attention row (decode and prefill) on the
# tensor cores in one order, with the split kernel's 128-key splits and merge
# (MEMRA_X_ATTN_TC=1, patch 2026-12-05-attention-tc-all-rows.patch on main e9fdc39 or later): the
# prompt form's speed at depth (2026-12-05-attention-prompt-form.patch: 9B pp512 @ d16384 +88%)
# without a chunk-size-dependent rounding, so prefix reuse's cut invariance holds. In the emulation
# (session 34): GpuOps.Attention passes with the knob on (a 1.5x score mutation fails it), and
# GpuModel.TinyFixturesMatchReference's new assertion (prefill logits == token-by-token logits, bit
# for bit) passes with it on. ptxas: 254 / 134 / 95 registers at head 256 / 128 / 64, no spills.
# The question for the device: decode. At B = 1 a row fills heads_per_kv of the MMA's 16 m rows
# (one warp a block); the split kernel's decode is ~68 us a layer at d32767 (B = 1) and ~352 us at
# B = 64 d4096 (H200, session 24); the prompt form walked a 32-key tile in ~1.8 us with 4 warps an SM.
# Build (here, ~5 min): git worktree add /tmp/tc HEAD && cd /tmp/tc && git apply
#   bench/notes/experiments/2026-12-05-attention-tc-all-rows.patch && cmake -S . -B build -G Ninja
#   -DCMAKE_BUILD_TYPE=Release -DMEMRA_EMBED_DEMO=OFF && cmake --build build && scripts/gpu-bundle.sh build
#   (copy /tmp/tc/.gpu/bundle.tar.xz to this checkout's .gpu/tc.tar.xz, and the fixtures:
#   tar cJf .gpu/fxs.tar.xz .fixtures/qwen35-tiny.* .fixtures/qwen3-tiny.*)
#   bash bench/notes/experiments/2026-12-05-attention-tc-all-rows.sh   carry [".gpu/tc.tar.xz", ".gpu/fxs.tar.xz"]
set -u
mkdir -p /tmp/g && tar xJf .gpu/tc.tar.xz -C /tmp/g && tar xJf .gpu/fxs.tar.xz
export LD_LIBRARY_PATH=/tmp/g/lib MEMRA_FIXTURES_DIR=$PWD/.fixtures MEMRA_GPU_TEST_DIR=/tmp/gt
mkdir -p /tmp/gt
X=/tmp/g/bin/memra
{
nvidia-smi --query-gpu=name --format=csv,noheader; $X --version
for v in 0 1; do
  echo "== tests MEMRA_X_ATTN_TC=$v"
  MEMRA_X_ATTN_TC=$v timeout 240 /tmp/g/bin/memra_tests \
    --gtest_filter='GpuOps.Attention:GpuAttention*:GpuPrefixCache*:GpuModel.TinyFixtures*:GpuModel.BatchedDecode*' 2>&1 |
    grep -E '^  attention|positions|OK \]|FAILED|Failure|differ' | head -50
done
M=/tmp/9b.gguf
$X synth --arch qwen35 --shape 9b --type q4_0 -o $M >/dev/null 2>&1 || echo "synth failed"
for r in 1 2; do
  for v in 0 1; do
    echo "r$r MEMRA_X_ATTN_TC=$v:"
    MEMRA_X_ATTN_TC=$v timeout 120 $X bench -m $M --device cuda -p 512 -n 0 -d 0,4096,16384 -r 3 --ctx 20000 2>/dev/null | grep pp512 | cut -d'|' -f5-10
    MEMRA_X_ATTN_TC=$v timeout 120 $X bench -m $M --device cuda -p 0 -n 32 -b 1,16,64 -d 512,4096 -r 2 --ctx 8192 2>/dev/null | grep tg | cut -d'|' -f5-10
    MEMRA_X_ATTN_TC=$v timeout 120 $X bench -m $M --device cuda -p 0 -n 32 -b 1 -d 32000 -r 2 --ctx 33000 2>/dev/null | grep tg | cut -d'|' -f5-10
  done
done
for v in 0 1; do echo -n "verify-exact B=16 d4096 TC=$v: "; MEMRA_X_ATTN_TC=$v timeout 120 $X bench -m $M --device cuda -p 0 -n 32 -b 16 -d 4096 -r 1 --ctx 8192 --verify-exact 2>&1 | grep -E 'differ' ; done
} 2>&1 | tee $OUT/attention-tc-all-rows.log
