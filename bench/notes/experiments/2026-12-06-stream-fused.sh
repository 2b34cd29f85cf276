#!/usr/bin/env bash
# Prepared in session 33; measured in session 34 (H100): flat, not landed (bench/results/2026-12-05-1910-h100-session34.md). Fused projections at one row streamed unsplit
# (MEMRA_X_STREAM_FUSED=1, patch 2026-12-06-stream-fused.patch on main 78e2d9b or later).
# Why: at B = 1 the 9B's fused GDN projection (qkv + gate + beta + alpha, 772 row groups, 28.5 MB)
# runs on the tiled kernel's ONE_ROW form at ~1.7 TB/s (21.6 us a call with events on an H100,
# session 33's per-op table) where the streamed SwiGLU moves 56.6 MB in ~27 us; session 11's
# "18.0 -> 19.2 us streamed" predates the bulk-copy ring (2026-12-04). Bits: the streaming kernel
# computes the canonical order (the emulation's GpuMatmul.FusedLaunchesMatchSeparateOnes passes with
# the knob on, and a target-lookup mutation fails it there).
# Build (here, ~3 min): git worktree add /tmp/sf HEAD && cd /tmp/sf && git apply
#   bench/notes/experiments/2026-12-06-stream-fused.patch && cmake -S . -B build -G Ninja
#   -DCMAKE_BUILD_TYPE=Release && cmake --build build --target memra && scripts/gpu-bundle.sh --memra sf
#   (writes /tmp/sf/.gpu/sf.xz and lib.tar.xz: copy both into this checkout's .gpu/).
#   bash bench/notes/experiments/2026-12-06-stream-fused.sh   carry [".gpu/lib.tar.xz", ".gpu/sf.xz"]   (~2 min)
set -u
mkdir -p /tmp/g && tar xJf .gpu/lib.tar.xz -C /tmp/g && xz -dc .gpu/sf.xz > /tmp/g/sf && chmod +x /tmp/g/sf
export LD_LIBRARY_PATH=/tmp/g/lib
X=/tmp/g/sf
{
nvidia-smi --query-gpu=name --format=csv,noheader; $X --version
for shape in 9b 2b; do
  M=/tmp/$shape.gguf
  $X synth --arch qwen35 --shape $shape --type q4_0 -o $M >/dev/null 2>&1 || echo "synth $shape failed"
  $X logits -m $M --device cuda --ids "$(seq -s, 100 300)" --mode decode -o /tmp/a.bin 2>&1 | grep -v wrote
  MEMRA_X_STREAM_FUSED=1 $X logits -m $M --device cuda --ids "$(seq -s, 100 300)" --mode decode -o /tmp/b.bin 2>&1 | grep -v wrote
  echo -n "$shape decode logits fused-streamed vs main: "; cmp /tmp/a.bin /tmp/b.bin && echo identical
  for r in 1 2; do
    for v in 0 1; do echo -n "r$r $shape B=1 stream-fused=$v: "; MEMRA_X_STREAM_FUSED=$v $X bench -m $M --device cuda -p 0 -n 64 -b 1 -d 512 -r 2 --ctx 8192 2>/dev/null | grep tg | cut -d'|' -f5-10; done
  done
  for v in 0 1; do
    echo "profile $shape stream-fused=$v:"; MEMRA_X_STREAM_FUSED=$v MEMRA_CUDA_PROFILE=1 $X bench -m $M --device cuda -p 0 -n 16 -b 1 -d 0 -r 1 --ctx 8192 2>&1 >/dev/null | grep -E 'attn_qkv|attn_q '
  done
  # The 4096 x 4096 matrices (ssm_out, attn_output: ~38% of the read rate at B = 1) by split width.
  for p in 1 2 4; do
    echo "profile $shape MEMRA_CUDA_STREAM_PARTS=$p:"; MEMRA_CUDA_STREAM_PARTS=$p MEMRA_CUDA_PROFILE=1 $X bench -m $M --device cuda -p 0 -n 16 -b 1 -d 0 -r 1 --ctx 8192 2>&1 >/dev/null | grep -E 'ssm_out|attn_output|ffn_down'
  done
  rm -f $M
done
} 2>&1 | tee $OUT/stream-fused.log
