#!/usr/bin/env python3
"""The torch-free layers compile without LibTorch: no source of engine/src/{base,config,colour,io,post,hint,farm,report}
or apps/ (except the model-level corridorkey-model-check) gets a LibTorch include path (checked in the build's compile_commands.json), and
none of them includes a torch / ATen / c10 header.

  torch_free_boundary.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import re
import sys

build, source = sys.argv[1], sys.argv[2]
free = [os.path.join(source, "engine", "src", d) for d in ("base", "config", "colour", "io", "post", "hint", "farm", "report")]
free.append(os.path.join(source, "apps"))
# corridorkey-model-check is the model-level GPU check: it links the native model directly so it
# builds with LibTorch alone (CK_MODEL_ONLY) on machines without the engine's I/O libraries.
exempt = [os.path.join(source, "apps", "corridorkey-model-check")]
commands = json.load(open(os.path.join(build, "compile_commands.json")))
checked, bad = 0, []
for c in commands:
    f = os.path.realpath(c["file"])
    if not any(f.startswith(os.path.realpath(d) + os.sep) for d in free):
        continue
    if any(f.startswith(os.path.realpath(d) + os.sep) for d in exempt):
        continue
    checked += 1
    if "torch/include" in c.get("command", " ".join(c.get("arguments", []))):
        bad.append(f"{f}: compiled with a LibTorch include path")
include = re.compile(r'#\s*include\s*[<"](torch|ATen|c10)/')
for d in free:
    for root, _, files in os.walk(d):
        if any(os.path.realpath(root).startswith(os.path.realpath(x)) for x in exempt):
            continue
        for n in files:
            if n.endswith((".cpp", ".h")):
                p = os.path.join(root, n)
                for i, line in enumerate(open(p, encoding="utf-8"), 1):
                    if include.search(line):
                        bad.append(f"{p}:{i}: includes a LibTorch header")
if checked < 10:
    bad.append(f"only {checked} torch-free sources found in compile_commands.json")
for b in bad:
    print("FAIL:", b)
if bad:
    sys.exit(1)
print(f"{checked} torch-free sources compiled without LibTorch: ok")
