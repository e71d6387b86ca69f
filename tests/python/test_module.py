"""The module as a library: its log lines, its version and system info, and `import
corridorkey` with torch imported before it, after it or not at all."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest


def test_log_lines_go_to_the_corridorkey_logger_then_to_a_handler(ck, caplog):
    with caplog.at_level(logging.DEBUG, logger="corridorkey"):
        ck.Model.load(tune="off").engine()  # an engine says how its refiner runs
    lines = [r for r in caplog.records if r.name == "corridorkey"]
    assert lines, "no log line reached logging.getLogger('corridorkey')"
    assert any("refiner" in r.getMessage() for r in lines)
    got = []
    ck.set_log_handler(lambda level, msg: got.append((level, msg)))
    try:
        ck.Model.load(tune="off").engine()
    finally:
        ck.set_log_handler(None)
    assert got and all(isinstance(l, int) and isinstance(m, str) for l, m in got)
    assert {l for l, _ in got} <= {logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR}


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_raising_log_handler_loses_its_line_not_the_work(ck, frame1):
    def bad(level, msg):
        raise RuntimeError("handler broke")

    ck.set_log_handler(bad)
    try:
        m = ck.Model.load(tune="off")
        assert m.engine().process_frame(*frame1)["matte"].shape == frame1[0].shape[:2]
    finally:
        ck.set_log_handler(None)


def test_version_and_info(ck):
    assert ck.__version__ == "0.2.0"
    i = ck.info()
    assert i["version"] == ck.__version__ and i["torch_version"].startswith("2.15")
    assert i["default_checkpoint"].endswith("greenformer_small_synthetic384.ts")


@pytest.mark.parametrize("code", [
    "import torch; import corridorkey; t = torch.zeros(2); print(corridorkey.Model.load(tune='off').arch, t.sum().item())",
    "import corridorkey; import torch; print(corridorkey.Model.load(tune='off').arch, torch.ones(2).sum().item())",
    "import corridorkey, sys; print(corridorkey.Model.load(tune='off').arch); assert 'torch' not in sys.modules",
])
def test_import_with_torch_before_after_or_not_at_all(code, tmp_path):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("small")
