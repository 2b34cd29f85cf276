#!/usr/bin/env bash
# Device-call script: matmul_kernel shapes forced on the output head and on the 2-8-row launches
# (2026-12-08-shape-override.patch: MEMRA_EXP_SHAPE_BIG / MEMRA_EXP_SHAPE_SMALL = "mt,nt,warps",
# shapes of pick_config's table only). Why: in session 25's profile the Q6_K head took 379 us a call
# at one row ({1,1,4}) and 317 us at 16 rows ({1,2,4}): the wider shape (more independent MMA /
# fold chains a warp) moved more bytes a second with the same weights. Every shape gives the same
# bits (the canonical order does not depend on the shape), so the rule is free to change.
# Prepare here: git apply the patch, build, `/work/notes/mkbin.sh shape` (or gpu-bundle.sh and keep
# its memra as .gpu/shape.xz), git checkout src. Carry .gpu/bundle.tar.xz (libraries) and
# .gpu/shape.xz. ~4 minutes.
set -u
mkdir -p /tmp/g /tmp/o && tar xJf .gpu/bundle.tar.xz -C /tmp/g && xz -dc .gpu/shape.xz > /tmp/o/shape && chmod +x /tmp/o/shape
export LD_LIBRARY_PATH=/tmp/g/lib
X=/tmp/o/shape
{
$X --version
$X synth --arch qwen35 --shape 9b --type q4_0 -o /tmp/9b.gguf >/dev/null 2>&1
for b in 1 8; do for sh in "" 1,2,4 1,2,2 1,1,2 1,2,1; do
  echo -n "head B=$b shape ${sh:-default}: "
  MEMRA_EXP_SHAPE_BIG=$sh MEMRA_CUDA_PROFILE=1 $X bench -m /tmp/9b.gguf --device cuda -p 0 -n 16 -b $b -d 512 -r 1 --ctx 8192 2>&1 \
    | grep "matmul output" | tr -s ' ' | tr '\n' ' '; echo
done; done
for r in 1 2; do for sh in "" 1,2,4 1,2,2; do
  echo -n "r$r tg32 head shape ${sh:-default}: "
  MEMRA_EXP_SHAPE_BIG=$sh $X bench -m /tmp/9b.gguf --device cuda -p 0 -n 32 -b 1,4,8 -d 512 -r 2 --ctx 8192 2>/dev/null \
    | grep tg32 | cut -d'|' -f5,6,7 | tr '\n' ' '; echo
done; done
for r in 1 2; do for sh in "" 1,2,4 1,2,2; do
  echo -n "r$r tg32 2-8-row shape ${sh:-default}: "
  MEMRA_EXP_SHAPE_SMALL=$sh $X bench -m /tmp/9b.gguf --device cuda -p 0 -n 32 -b 2,4,8 -d 512 -r 2 --ctx 8192 2>/dev/null \
    | grep tg32 | cut -d'|' -f5,6,7 | tr '\n' ' '; echo
done; done
} 2>&1 | tee $OUT/shape-sweep.log
