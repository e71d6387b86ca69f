#!/usr/bin/env python3
"""No dated timing in the public headers (issue 50): a header states contracts; the numbers
that back a choice live in docs/performance.md with their date, commit and CPU, and the
comment links the section.

  header_timings.py SOURCE_DIR [FILE...]

Scans the installed public headers (engine/include/corridorkey/*.h and the public ones of
model/base/include/corridorkey), or the FILEs given (to check the checker), for a CPU model
name (Zen 4, EPYC, Xeon, Ryzen, Core i7, Graviton, Apple M2, Sapphire Rapids, ...), a time
figure (12 ms, 2.6 s, 300 us) or a rate (40 GFLOP/s). Prints one "FAIL: file:line: text" per
hit and "header timings: ok (N headers)" when there is none. Exit 0 ok, 1 a hit, 2 usage.
"""
import glob
import os
import re
import sys

CPU = re.compile(r"\b(Zen ?\d|EPYC|Xeon|Ryzen|Threadripper|Opteron|Core i[3579]|Graviton|Neoverse|"
                 r"Apple M\d|Sapphire Rapids|Granite Rapids|Emerald Rapids|Ice Lake|Cascade Lake|"
                 r"Skylake|Cooper Lake|Alder Lake|Raptor Lake)\b")
TIME = re.compile(r"\b\d+(?:[.,]\d+)?(?:-\d+(?:[.,]\d+)?)? ?(?:ms|us|µs|ns)\b|\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)? s\b")
RATE = re.compile(r"\b\d+(?:\.\d+)? ?[GTM]FLOP(?:/s|S)\b|\b\d+(?:\.\d+)? ?GB/s\b")


def headers(src):
    out = sorted(glob.glob(os.path.join(src, "engine", "include", "corridorkey", "*.h")))
    base = os.path.join(src, "model", "base", "include", "corridorkey")
    out += [os.path.join(base, n) for n in ("errors.h", "export.h", "version.h.in") if os.path.exists(os.path.join(base, n))]
    return out


def main(argv):
    if not argv:
        sys.stderr.write(__doc__)
        return 2
    src, files = argv[0], argv[1:] or headers(argv[0])
    if not files:
        print("FAIL: no public header found under %s" % src)
        return 1
    hits = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for what, rx in (("a CPU model", CPU), ("a time figure", TIME), ("a rate", RATE)):
                    m = rx.search(line)
                    if m:
                        hits += 1
                        print("FAIL: %s:%d: %s '%s' (move the number to docs/performance.md and link it): %s"
                              % (os.path.relpath(path, src), n, what, m.group(0), line.strip()))
    if hits:
        return 1
    print("header timings: ok (%d headers)" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
