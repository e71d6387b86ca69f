#!/usr/bin/env python3
"""bench's rows for the engines a user could pick instead (issue 51): reference-openvino in
the plan's precision and pinned to float32, and reference-compile (torch.compile), beside the
eager reference and the optimized profile, in one bench run on the same seeded weights.

Each graph row must run the same network (its drift against the eager reference bounded by
its precision), report its converting / compiling time apart from the frame times, and run
in the precision the engine's plan picked unless pinned. A runtime that cannot be imported
gives a clean "not installed" row, not a failure. Slow: torch.compile compiles for minutes.

  cli_bench_reference.py CLI WORKDIR
"""
import json
import os
import stat
import subprocess
import sys

cli, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
env = dict(os.environ, CORRIDORKEY_TUNE_CACHE=os.path.join(work, "tune.json"))
base = [cli, "bench", "--random-weights", "--arch", "tiny", "--img-size", "64", "--frames", "2",
        "--warmup", "1", "--device", "cpu", "--json"]


def bench(profiles, extra_env=None):
    args = base + [a for p in profiles for a in ("--profile", p)]
    r = subprocess.run(args, capture_output=True, text=True, env=dict(env, **(extra_env or {})), timeout=1500)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    rows = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    return {row["profile"]: row for row in rows}, r.stdout


def check(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


try:
    import openvino  # noqa: F401  (the venv the CLI's reference rows use is this one)
    have_openvino = True
except ImportError:
    have_openvino = False

rows, _ = bench(["reference", "optimized", "reference-openvino", "reference-openvino:precision=float32",
                 "reference-compile"])
plan = rows["optimized"]["precision"]
# Drift bound per precision: float32 graph runtimes reorder float32 sums (1e-3 on the sigmoid
# outputs); bf16 rounds every matmul input to 8 bits of mantissa.
bound = {"float32": 1e-3, "bfloat16": 5e-2}
compiled = rows["reference-compile"]
check(compiled["precision"].startswith(plan) and "channels-last" in compiled["precision"],
      f"reference-compile ran {compiled['precision']}, the plan picked {plan}")
check("torch.compile" in compiled["compile"], f"reference-compile's runtime: {compiled['compile']}")
check(compiled["setup_ms"] > 0 and compiled["median_ms"] > 0, f"reference-compile times: {compiled}")
check(compiled["alpha_max_diff"] < bound[plan] and compiled["fg_max_diff"] < bound[plan],
      f"reference-compile drifts from the eager reference: {compiled['alpha_max_diff']}, {compiled['fg_max_diff']}")
print(f"reference-compile: {compiled['precision']}, compiling {compiled['setup_ms']:.0f} ms apart, "
      f"frame {compiled['median_ms']:.1f} ms, drift {compiled['alpha_max_diff']:.2e}")
if have_openvino:
    for name, want in (("reference-openvino", plan), ("reference-openvino:precision=float32", "float32")):
        r = rows[name]
        check("not_installed" not in r, f"{name}: not installed, but openvino imports")
        check(r["precision"] == want, f"{name} ran {r['precision']}, expected {want}")
        check("openvino" in r["compile"], f"{name}'s runtime: {r['compile']}")
        check(r["setup_ms"] > 0 and r["median_ms"] > 0, f"{name} times: {r}")
        check(r["alpha_max_diff"] < bound[want] and r["fg_max_diff"] < bound[want],
              f"{name} drifts from the eager reference: {r['alpha_max_diff']}, {r['fg_max_diff']}")
        print(f"{name}: {r['precision']}, converting {r['setup_ms']:.0f} ms apart, frame "
              f"{r['median_ms']:.1f} ms, drift {r['alpha_max_diff']:.2e}")
else:
    check(rows["reference-openvino"].get("not_installed") == "openvino", "openvino missing, but no clean row")
    print("openvino is not installed here: its rows were checked as 'not installed' only")

# A runtime that cannot be imported: Python's own way to block a module (None in sys.modules)
# in the interpreter bench starts, so the row must come back "not installed", not an error.
shim = os.path.join(work, "python-without-openvino")
with open(shim, "w") as f:
    f.write("#!/bin/sh\nexec '%s' -c \"import runpy, sys; sys.modules['openvino'] = None; "
            "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')\" \"$@\"\n" % sys.executable)
os.chmod(shim, os.stat(shim).st_mode | stat.S_IXUSR)
rows, text = bench(["reference", "reference-openvino"], {"CORRIDORKEY_PYTHON": shim})
check(rows["reference-openvino"].get("not_installed") == "openvino", f"no clean not-installed row: {rows}")
check(rows["reference"]["median_ms"] > 0, "the eager row beside a missing runtime did not run")
r = subprocess.run(base[:-1] + ["--profile", "reference-openvino"], capture_output=True, text=True,
                   env=dict(env, CORRIDORKEY_PYTHON=shim), timeout=600)
check(r.returncode == 0 and "not installed: Python package 'openvino'" in r.stdout,
      f"the table's not-installed line: rc {r.returncode}\n{r.stdout}\n{r.stderr[-2000:]}")
# A field a reference row does not take is refused, naming it.
r = subprocess.run(base + ["--profile", "reference-openvino:tile_size=64"], capture_output=True, text=True,
                   env=env, timeout=600)
check(r.returncode != 0 and "tile_size=64" in r.stderr, f"a bad field was not refused by name: {r.stderr[-500:]}")
print("cli bench reference rows: ok")
