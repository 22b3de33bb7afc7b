#!/usr/bin/env python3
"""Whether two CUDA builds hold the same kernel machine code: for every object of
BUILD/cuda/libws1cuda.a.p, the cubin in its .nv_fatbin section (objcopy) is compared section by
section, line tables left out (.debug_line and its relocations move when a header does). Used to
show that a change outside the kernels (D39's include reshuffle) left every kernel's SASS alone,
without cuobjdump on this machine.

    python3 tools/device/kernels_equal.py BUILD_A BUILD_B     (exit 0: equal, 1: not)
"""
import os
import struct
import subprocess
import sys
import tempfile

IGNORED = {".debug_line", ".rela.debug_line", ".rel.debug_line"}


def fatbin(obj):
    with tempfile.NamedTemporaryFile() as out:
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj, out.name], check=True)
        return open(out.name, "rb").read()


def sections(blob):
    """{name: bytes} of the first ELF image in blob (the sm_90a cubin); {} when there is none."""
    at = blob.find(b"\x7fELF")
    if at < 0:
        return {}
    e = blob[at:]
    shoff = struct.unpack_from("<Q", e, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", e, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", e, shoff + i * shentsize) for i in range(shnum)]
    names = heads[shstrndx][4]
    out = {}
    for name, kind, _flags, _addr, off, size in heads:
        n = e[names + name:e.index(b"\0", names + name)].decode()
        out[n] = b"" if kind == 8 else e[off:off + size]  # SHT_NOBITS holds no bytes
    return out


def main(a, b):
    objs = lambda build: {f for f in os.listdir(os.path.join(build, "cuda", "libws1cuda.a.p")) if f.endswith(".o")}
    names = objs(a)
    if names != objs(b):
        print("different object sets:", sorted(names ^ objs(b)))
        return 1
    differ, kernels = [], 0
    for f in sorted(names):
        sa, sb = (sections(fatbin(os.path.join(build, "cuda", "libws1cuda.a.p", f))) for build in (a, b))
        kernels += sum(1 for n in sa if n.startswith(".text."))
        bad = sorted(n for n in set(sa) | set(sb) if n not in IGNORED and sa.get(n) != sb.get(n))
        if bad:
            differ.append(f)
            print(f"{f}: {', '.join(bad[:8])}")
    print(f"{len(names)} objects, {kernels} kernel sections: {'equal' if not differ else f'{len(differ)} objects differ'}")
    return 1 if differ else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
