#!/usr/bin/env bash
# Device-call script (untested: this side has no cuobjdump): the SASS of the carried binaries'
# matmul kernels, and per kernel the instruction count and the mix (I2F, PRMT, LOP3, SHF, HMMA,
# LDS, FFMA). .gpu/bundle.tar.xz (new) and optionally .gpu/old.xz (old memra). The decode's cost
# per block is what session 24 found the matmuls bound by; count before benchmarking a guess.
set -u
mkdir -p /tmp/g && tar xJf .gpu/bundle.tar.xz -C /tmp/g
[ -f .gpu/old.xz ] && mkdir -p /tmp/o && xz -dc .gpu/old.xz > /tmp/o/memra
OBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
[ -n "$OBJ" ] || { echo "no cuobjdump on the device machine" | tee $OUT/sass.log; exit 0; }
count() {  # $1 binary, $2 tag
  "$OBJ" -sass "$1" 2>/dev/null | awk -v tag="$2" '
    /Function :/ { name = $3 }
    /^ +\/\*[0-9a-f]+\*\/ / && name ~ /matmul/ {
      n[name]++
      for (op in want) if (index($0, " " op)) c[name, op]++
    }
    BEGIN { split("I2F PRMT LOP3 SHF HMMA LDS FFMA HADD2 HFMA2 BAR", w, " "); for (i in w) want[w[i]] = 1 }
    END { for (k in n) { line = tag " " n[k]; for (op in want) line = line " " op "=" (c[k, op] + 0); print line, substr(k, 1, 120) } }' | sort -k3
}
{ count /tmp/g/bin/memra new; [ -x /tmp/o/memra ] && count /tmp/o/memra old; } > $OUT/sass.log
"$OBJ" -sass /tmp/g/bin/memra 2>/dev/null | xz > $OUT/sass-new.txt.xz
wc -l $OUT/sass.log
