#!/usr/bin/env python3
"""Instruction counts of the matmul kernels' k-tile loops, from the SASS of a CUDA build.

The matmuls are issue-bound at every row count (bench/notes/pending-on-hardware.md, session 24):
the per-k-tile instruction count decides a decode change before a benchmark does. This reads the
SASS of the compiled kernel objects (no GPU needed) and prints, per kernel instantiation, the
instructions from the stage wait before the first tensor-core instruction to the branch after the
last one (one k-tile of one warp, the common path), with the mix by opcode, and each kernel's
registers a thread and stack / local (spill) bytes (cuobjdump -res-usage).

Usage: scripts/sass_count.py [BUILD_DIR] [--filter SUBSTRING] [--diff OTHER_BUILD_DIR]
cuobjdump: from PATH, CUDA's bin, or `pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm` (their
nvidia/cu13/bin; cuobjdump -sass runs nvdisasm, so put that folder on PATH).
"""
import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys

TYPES = {0: "f32", 1: "f16", 2: "q4_0", 8: "q8_0", 12: "q4_k", 13: "q5_k", 14: "q6_k", 30: "bf16"}
OBJS = ["k_matmul_inst_q4", "k_matmul_inst_q56", "k_matmul_inst_q8", "k_matmul_inst_float", "k_moe"]


def find_cuobjdump():
    exe = shutil.which("cuobjdump") or next(iter(glob.glob("/usr/local/cuda*/bin/cuobjdump")), None)
    if exe:
        return exe
    try:
        import nvidia  # the pip package's namespace
        for root in nvidia.__path__:
            hits = glob.glob(os.path.join(root, "*", "bin", "cuobjdump"))
            if hits:
                return hits[0]
    except ImportError:
        pass
    sys.exit("sass_count: no cuobjdump (install the CUDA toolkit's, or `pip install nvidia-cuda-cuobjdump`)")


def dump_lines(build, cuobjdump, flag):
    """The lines `cuobjdump FLAG` prints for each matmul object of BUILD that exists, in turn."""
    for obj in OBJS:
        path = os.path.join(build, "CMakeFiles", "memra_cuda.dir", "src", "backend", "cuda", obj + ".cu.o")
        if os.path.exists(path):
            yield from subprocess.run([cuobjdump, flag, path], capture_output=True, text=True, check=True).stdout.splitlines()


def by_function(lines, header):
    """(kernel name, line) for each line after a `header` line (its group 1 the name); (name, None) at
    the header itself."""
    name = None
    for line in lines:
        m = re.search(header, line)
        if m:
            name = m.group(1)
            yield name, None
        elif name:
            yield name, line


def kernels(build, cuobjdump):
    """{kernel name: [(address, instruction)]} of the matmul objects of BUILD."""
    out = {}
    for name, line in by_function(dump_lines(build, cuobjdump, "-sass"), r"Function : (\S+)"):
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line) if line else None
        out.setdefault(name, [])
        if m:
            out[name].append((int(m.group(1), 16), m.group(2)))
    if not out:
        sys.exit(f"sass_count: no matmul kernel objects under {build} (build it first: README command 1)")
    return out


def resources(build, cuobjdump):
    """{kernel name: (registers a thread, stack + local bytes)} from cuobjdump -res-usage."""
    out = {}
    for name, line in by_function(dump_lines(build, cuobjdump, "-res-usage"), r"Function (\S+):"):
        m = re.search(r"REG:(\d+) STACK:(\d+) .*LOCAL:(\d+)", line) if line else None
        if m:
            out[name] = (int(m.group(1)), int(m.group(2)) + int(m.group(3)))
    return out


def opcode(ins):
    return re.sub(r"^@!?U?P\w+\s+", "", ins).split()[0].split(".")[0]


def label(name):
    m = re.search(r"\d((?:matmul|moe)[a-z_]*?kernel(?:_\d+)?)ILNS_8GgmlTypeE(\d+)E((?:L[ib]\d+E)*)", name)
    if not m:
        return name[:60]
    args = re.findall(r"L([ib])(\d+)E", m.group(3))
    return f"{m.group(1)} {TYPES.get(int(m.group(2)), m.group(2))} " + ",".join(v for _, v in args)


def k_tile(ins):
    """(count, Counter) of one k-tile's instructions, or None where the kernel has no HMMA."""
    mma = [i for i, (_, s) in enumerate(ins) if "HMMA" in s]
    if not mma:
        return None
    waits = [i for i in range(mma[0]) if "TRYWAIT" in ins[i][1] or "DEPBAR" in ins[i][1]]
    start = waits[-1] if waits else 0
    end = next((i for i in range(mma[-1], len(ins)) if opcode(ins[i][1]) == "BRA"), len(ins) - 1)
    ops = [opcode(s) for _, s in ins[start:end + 1]]
    return len(ops), collections.Counter(ops)


def table(build, cuobjdump, flt):
    rows = {}
    res = resources(build, cuobjdump)
    for name, ins in kernels(build, cuobjdump).items():
        if flt and flt not in name and flt not in label(name):
            continue
        kt = k_tile(ins)
        if kt:
            rows[label(name)] = (len(ins), kt[0], kt[1], res.get(name, (0, 0)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--filter", default="")
    ap.add_argument("--diff", help="another build directory: its k-tile count beside this one's")
    a = ap.parse_args()
    exe = find_cuobjdump()
    rows = table(a.build, exe, a.filter)
    other = table(a.diff, exe, a.filter) if a.diff else {}
    keys = ["HMMA", "FFMA", "LOP3", "HADD2", "HFMA2", "SHF", "PRMT", "I2FP", "FMUL", "LDS", "IMAD"]
    # regs: registers a thread; stack: stack + local bytes (spills), 0 when nothing spills.
    print(f"{'kernel type MT,NT,SW,stages[,one row]':38} {'total':>6} {'k-tile':>6}" + (f" {'other':>6}" if other else "") +
          f" {'regs':>4} {'stack':>5}" + (f" {'other':>9}" if other else "") + "  " + " ".join(keys))
    for lab in sorted(rows):
        total, n, mix, (reg, stack) = rows[lab]
        o = f" {other[lab][1]:6d}" if lab in other else (" " * 7 if other else "")
        ro = f" {other[lab][3][0]:4d}/{other[lab][3][1]:<4d}" if lab in other else (" " * 10 if other else "")
        print(f"{lab:38} {total:6d} {n:6d}{o} {reg:4d} {stack:5d}{ro}  " + " ".join(f"{k}={mix.get(k, 0)}" for k in keys))


if __name__ == "__main__":
    main()
