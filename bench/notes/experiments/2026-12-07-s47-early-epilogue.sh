#!/usr/bin/env bash
# Prepared in session 47, NOT RUN (the device budget was spent). The one-row streaming matmul's
# epilogue reads issued right after the PDL wait instead of after the k-tiles: the row's exponent
# (every launch) and an accumulating target's current outputs of the block's first set (ssm_out,
# attn_output, ffn_down: the residual). Same values, same bits; each block's last dependent L2 round
# trip leaves the chain (~128 one-row launches a 9B token; session 47's skip table: the 4096 x 4096
# matrices cost 6-8 us on the chain for 2.8 us of bytes). Registers (ptxas; plain, SwiGLU, split, split SwiGLU): Q4_0 64 / 80
# / 62 / 71 -> 64 / 72 / 64 / 70, no spill but F32 split SwiGLU (12 B); the emulation passes GpuMatmul.*
# and GpuOps.Matmul with it.
# Build: git apply bench/notes/experiments/2026-12-07-s47-early-epilogue.patch (on 3f14e6d or later),
# cmake --build build, scripts/gpu-bundle.sh --memra X build,
# strip -o /tmp/mt build/memra_tests && xz -T0 -6 -c /tmp/mt > .gpu/T.xz, dense fixtures as .gpu/fx.tar.xz
# (rm -rf .fixtures; mkdir .fixtures; cp ../shared/fixtures/qwen35-tiny.* ../shared/fixtures/qwen3-tiny.* .fixtures/;
# tar cJf .gpu/fx.tar.xz .fixtures). Carry .gpu/X.xz .gpu/T.xz .gpu/lib.tar.xz .gpu/fx.tar.xz (~63 MiB
# with the tree: at the limit). MEMRA_EXP_EARLY_EPI=0 turns the early reads off (main's kernel).
# Land it without the switch if B = 1 gains on both models and the tests pass; ~4 minutes.
set -u
source bench/notes/experiments/device-x.sh
{
nvidia-smi --query-gpu=name --format=csv,noheader
$X synth --arch qwen35 --shape 9b --type q4_0 -o $f9 > /dev/null 2>&1
$X synth --arch qwen35moe --shape 35b-a3b --type q4_0 -o $f35 > /dev/null 2>&1 &
gpu_tests 'GpuMatmul.*:GpuOps.Matmul:GpuModel.TinyFixtures*:GpuPrefixCache.*'
wait
for r in 1 2; do for e in 0 1; do
  echo "r$r 9B early_epi=$e"
  MEMRA_EXP_EARLY_EPI=$e timeout 100 $X bench -m $f9 --device cuda -p 0 -n 128 -r 3 --ctx 2048 2>/dev/null | rows
  MEMRA_EXP_EARLY_EPI=$e timeout 100 $X bench -m $f9 --device cuda -p 0 -n 64 -b 1 -d 512 -r 3 --ctx 2048 2>/dev/null | rows
  echo "r$r 35B early_epi=$e"
  MEMRA_EXP_EARLY_EPI=$e timeout 100 $X bench -m $f35 --device cuda -p 0 -n 64 -b 1 -d 512 -r 3 --ctx 2048 2>/dev/null | rows
done; done
} 2>&1 | tee $OUT/s47-early-epilogue.log
