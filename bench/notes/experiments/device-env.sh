# Sourced by the session call scripts here (from session 43 on): .gpu/bundle.tar.xz unpacked in
# /tmp/g (once a machine), M its memra, F the 9B Q4_0 synth (made once), rows() a bench table's
# rows from the test column on.
[ -x /tmp/g/bin/memra ] || { mkdir -p /tmp/g && tar xJf .gpu/bundle.tar.xz -C /tmp/g; }
export LD_LIBRARY_PATH=/tmp/g/lib
M=/tmp/g/bin/memra
F=/tmp/9b.gguf
[ -f $F ] || $M synth --arch qwen35 --shape 9b --type q4_0 -o $F > /dev/null 2>&1
rows() { grep -E '^\| [^-]' | grep -v '| model |' | cut -d'|' -f5-9; }
