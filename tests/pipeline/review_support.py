"""Shared by the `review` tests (cli_review.py, cli_review_edit.py): the real binary as a
child process, raw HTTP requests, Debian's chromium driven by Playwright, and the image
arithmetic the page's pixels are checked against. Screenshots go to the test's own work
folder only."""
import os
import subprocess
import sys

os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")  # before cv2 is imported
import cv2  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import review_browser  # noqa: E402
from review_browser import Browser, Review  # noqa: E402,F401


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


review_browser.check = check  # a failed check in the helpers fails the test the same way


def make_clip(d, *args):
    subprocess.run([os.environ["CK_MAKE_CLIP"], d, *args], check=True)


def read(path):
    im = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    check(im is not None, f"cannot read {path}")
    if im.ndim == 3:  # OpenCV's BGR(A) to RGB(A)
        im = im[:, :, [2, 1, 0, 3][: im.shape[2]]]
    return im.astype(np.float32) / (255.0 if im.dtype == np.uint8 else 65535.0 if im.dtype == np.uint16 else 1.0)


def srgb_encode(x):
    x = np.clip(x, 0, None)
    return np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(x, 1 / 2.4) - 0.055)


def srgb_decode(x):
    return np.where(x <= 0.04045, x / 12.92, np.power((x + 0.055) / 1.055, 2.4))


def levels(x):
    return np.round(np.clip(x, 0, 1) * 255).astype(np.int32)


def max_diff(a, b):
    check(a.shape == b.shape, f"shapes differ: {a.shape} {b.shape}")
    return int(np.abs(a.astype(np.int32) - b.astype(np.int32)).max())
