"""The wheel: built from python/ on the engine's build, installed into a fresh venv with no
network, imported from outside the source tree, keying a frame with its own library and its
own data (profiles, the bundled model) from inside the installed package.

The fresh venv gets torch (and numpy) from the project venv through a .pth file: there is
no pip cache to install the pinned torch from, and the torch and CUDA wheels are 3 GB. That
also puts torch in another site-packages than corridorkey, the layout the module's LibTorch
preload (corridorkey/_libs.py) is for."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import sysconfig

from conftest import SAMPLE, SOURCE


def test_the_wheel_installs_into_a_fresh_venv_and_keys(tmp_path):
    build = os.environ.get("CK_BUILD_DIR", str(SOURCE / "build"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                    "-C", f"cmake.define.CK_ENGINE_BUILD={build}", "-w", str(wheels), str(SOURCE / "python")],
                   check=True)
    wheel = next(wheels.glob("corridorkey-*.whl"))
    fresh = tmp_path / "fresh"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(fresh)], check=True)
    py = fresh / "bin" / "python"
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    # After the install: pip would take the project venv's corridorkey for this one.
    (pathlib.Path(site) / "project_venv_torch.pth").write_text(sysconfig.get_paths()["platlib"] + "\n")

    probe = r"""
import json, sys, cv2, corridorkey
plate = cv2.imread(sys.argv[1])[:, :, ::-1].copy()
r = corridorkey.Model.load(tune="off").engine().process_frame(plate)
maps = open("/proc/self/maps").read()
libs = sorted({l.split()[-1] for l in maps.splitlines() if "libcorridorkey_engine" in l or "libtorch_cpu" in l})
print(json.dumps({"module": corridorkey.__file__, "info": corridorkey.info(), "matte": list(r["matte"].shape),
                  "libs": libs}))
"""
    r = subprocess.run([py, "-c", probe, str(SAMPLE / "Input" / "frame_0001.png")], capture_output=True, text=True,
                       cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    pkg = os.path.join(site, "corridorkey")
    assert got["module"].startswith(pkg)
    assert got["matte"] == [180, 320]
    engine_libs = [l for l in got["libs"] if "libcorridorkey_engine" in l]
    assert engine_libs and all(l.startswith(pkg) for l in engine_libs), got["libs"]
    # Its data from inside the installed package, never from the source or build tree.
    for key in ("profile_dir", "default_checkpoint"):
        assert got["info"][key].startswith(pkg), (key, got["info"][key])
