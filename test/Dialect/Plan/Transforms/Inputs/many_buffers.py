"""A straight-line plan of many buffers for loom-plan-memory's search.

    many_buffers.py emit            a function of 600 kernels (fixed seed)
    many_buffers.py check FILE      FILE's placement: no two buffers alive
                                    at once share a byte

Each kernel reads a few recent buffers and writes a fresh one of a random
size, so lifetimes of every length overlap and later, smaller buffers fill
gaps below earlier ones (the search's sorted chunks split in the middle).
"""
import random
import re
import sys


def emit():
    rng = random.Random(7)
    lines = ["func.func @many() {",
             "  %x = plan.input \"x\" : memref<16xf32>"]
    names, sizes = ["%x"], [16]
    for i in range(600):
        reads = sorted({rng.randrange(max(0, len(names) - 40), len(names))
                        for _ in range(rng.randint(1, 3))})
        size = rng.choice([16, 32, 48, 64, 128, 256, 1024])
        out = f"%b{i}"
        lines.append(f"  {out} = plan.alloc : memref<{size}xf32>")
        ins = ", ".join(names[r] for r in reads)
        types = ", ".join(f"memref<{sizes[r]}xf32>" for r in reads)
        lines.append(f"  plan.kernel \"k\" ins({ins} : {types}) "
                     f"outs({out} : memref<{size}xf32>)")
        names.append(out)
        sizes.append(size)
    lines.append(f"  plan.output \"y\", {names[-1]} : memref<{sizes[-1]}xf32>")
    lines += ["  return", "}"]
    print("\n".join(lines))


def check(path):
    body = [l.strip() for l in open(path) if l.strip()]
    start, bytes_, first, last = {}, {}, {}, {}
    for position, line in enumerate(body):
        m = re.match(r"(%\w+) = plan\.(?:alloc|input)[^:]*offset (\d+) : "
                     r"memref<(\d+)xf32>", line)
        if m:
            name = m.group(1)
            start[name] = int(m.group(2))
            bytes_[name] = (int(m.group(3)) * 4 + 63) // 64 * 64
            first[name] = 0 if "plan.input" in line else position
            last[name] = first[name]
            continue
        for name in re.findall(r"%\w+", line):
            if name in start:
                last[name] = len(body) if "plan.output" in line else position
    names = list(start)
    clashes = 0
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            alive = first[a] <= last[b] and first[b] <= last[a]
            shared = (start[a] < start[b] + bytes_[b]
                      and start[b] < start[a] + bytes_[a])
            clashes += alive and shared
    print(f"{len(names)} buffers, {clashes} clashes")


if __name__ == "__main__":
    emit() if sys.argv[1] == "emit" else check(sys.argv[2])
