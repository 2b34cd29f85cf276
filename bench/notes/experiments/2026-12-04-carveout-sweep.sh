#!/usr/bin/env bash
# Device-call script for 2026-12-04-carveout-sweep.patch (MEMRA_X_CARVEOUT_RULE, launch.cuh): one
# memra built with the patch as .gpu/sweep.xz, the bundle's lib/ as .gpu/lib.tar.xz. Families: 1
# matmul_kernel, 2 streaming matmul, 4 GDN + conv, 8 attention, 16 other launch() kernels, 32
# act_f16 / rms_norm_act; "mask:lo-hi:pct" entries, first match wins, pct -1 = the driver's choice.
# ~4-5 minutes with the 9B synth; add 27B / 35B-A3B rows when time allows.
set -u
mkdir -p /tmp/g && tar xJf .gpu/lib.tar.xz -C /tmp/g && xz -dc .gpu/sweep.xz > /tmp/g/memra && chmod +x /tmp/g/memra
export LD_LIBRARY_PATH=/tmp/g/lib
M=/tmp/g/memra
[ -f /tmp/9b.gguf ] || $M synth --arch qwen35 --shape 9b --type q4_0 -o /tmp/9b.gguf >/dev/null 2>&1
row() { grep -E 'tg32' | cut -d'|' -f7 | tr '\n' ' '; echo; }
B=1,2,3,4,6,8,12,16,24,32,48,64
run() { echo -n "$1 "; MEMRA_X_CARVEOUT_RULE="$2" $M bench -m /tmp/9b.gguf --device cuda -p 0 -n 32 -b $B -d 512 -r 2 --ctx 8192 2>/dev/null | row; }
for r in 1 2; do
  run main ""
  run act-off "32:1-64:-1"                 # the landed rule switched off
  run act-all "32:1-64:100"                # act_f16 / rms_norm_act at 100 for every B
  run gdn "4:1-64:100"                     # + the GDN core and conv
  run other "16:1-64:100"                  # + kv_append, embed, argmax, sampling, ...
  run matmul "1:1-64:100"
  run all-but-gdn-attn "51:1-64:100"
  run all "63:1-64:100"
done
echo done
