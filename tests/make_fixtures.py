#!/usr/bin/env python3
"""Generate the model test fixtures into a build folder (run by ctest as a fixture setup).

Everything is seeded (tools/export_torchscript.py), so the files are identical on every run;
a stamp with the command list skips regeneration when nothing changed. The full
hiera_base_plus archive at 256 is ~285 MB, which is why fixtures are generated, not committed.

  python tests/make_fixtures.py --out build/tests/fixtures [--no-full]
"""
import argparse
import hashlib
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import export_torchscript as ex  # noqa: E402


def jobs(out, full):
    j = lambda *a: [str(x) for x in a]  # noqa: E731
    yield j("--arch", "tiny", "--img-size", 128, "--seed", 0,
            "--output", f"{out}/tiny128.ts", "--fixture", f"{out}/tiny128_fixture.pt",
            "--write-pth", f"{out}/tiny128.pth", "--pth-prefix", "_orig_mod.")
    # Same weights, "top" layout without prefix: both layouts must load identically.
    yield j("--arch", "tiny", "--img-size", 128, "--seed", 0,
            "--write-pth", f"{out}/tiny128_top.pth", "--pth-layout", "top")
    # Trained at 256, used at 128: pos_embed must be resized like the reference does.
    yield j("--arch", "tiny", "--img-size", 256, "--seed", 3,
            "--write-pth", f"{out}/tiny256.pth", "--output", f"{out}/tiny256.ts")
    yield j("--arch", "tiny", "--img-size", 128, "--seed", 3,
            "--output", f"{out}/tiny256_at128.ts", "--checkpoint", f"{out}/tiny256.pth")
    yield j("--arch", "tiny", "--img-size", 128, "--seed", 5,
            "--pos-embed-fixture", f"{out}/pos_embed_64_to_40.pt",
            "--pos-embed-from", 64, "--pos-embed-to", 40)
    if full:
        yield j("--arch", "hiera_base_plus", "--img-size", 256, "--seed", 0,
                "--output", f"{out}/base_plus256.ts", "--fixture", f"{out}/base_plus256_fixture.pt")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-full", action="store_true", help="skip the 285 MB hiera_base_plus archive")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    todo = list(jobs(a.out, not a.no_full))
    sources = b"".join(open(os.path.join(HERE, "..", "tools", f), "rb").read()
                       for f in ("export_torchscript.py", "greenformer_ref.py"))
    digest = hashlib.sha256(repr(todo).encode() + sources).hexdigest()
    stamp = os.path.join(a.out, "stamp.txt")
    if os.path.exists(stamp) and open(stamp).read() == digest:
        print(f"fixtures up to date in {a.out}")
        return 0
    t0 = time.time()
    for argv in todo:
        rc = ex.main(argv)
        if rc:
            print(f"fixture generation failed: {' '.join(argv)}", file=sys.stderr)
            return rc
    open(stamp, "w").write(digest)
    print(f"fixtures written to {a.out} in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
