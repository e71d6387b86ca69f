"""`corridorkey-engine review` from Python: the binary as a child process (the URL, port and
token it prints, raw HTTP requests that send a path exactly as given) and Debian's chromium,
headless with an sRGB output profile, through Playwright (its own browser download is not
used). The review tests (tests/pipeline/cli_review*.py) and tools/review_page.py use it."""
import http.client
import json
import math
import re
import signal
import subprocess
import threading

import numpy as np

CHROMIUM = "/usr/bin/chromium"


class ReviewError(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise ReviewError(msg)


class Review:
    """`corridorkey-engine review ARGS` as a child; .url, .port, .token once it listens."""

    def __init__(self, cli, *args):
        self.p = subprocess.Popen([cli, "review", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        self.stderr = []
        threading.Thread(target=lambda: self.stderr.extend(self.p.stderr), daemon=True).start()
        line = self.p.stdout.readline().strip()
        m = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]{64})", line)
        check(m, f"review printed {line!r}, not one URL with a token; stderr: {''.join(self.stderr)}")
        self.url, self.port, self.token = line, int(m.group(1)), m.group(2)
        self.host = f"127.0.0.1:{self.port}"
        self.cookie = f"ck_review_{self.port}={self.token}"

    def request(self, method, path, body=None, headers=None, host=None, cookie=True):
        """A raw request: the path is sent exactly as given (no normalisation)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        h = {"Host": host or self.host}
        if cookie:
            h["Cookie"] = self.cookie
        h.update(headers or {})
        c.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in h.items():
            c.putheader(k, v)
        data = body.encode() if isinstance(body, str) else body
        if data is not None:
            c.putheader("Content-Length", str(len(data)))
        c.endheaders(data)
        r = c.getresponse()
        out = (r.status, dict(r.getheaders()), r.read())
        c.close()
        return out

    def get_json(self, path):
        s, _, b = self.request("GET", path)
        check(s == 200, f"GET {path}: {s} {b[:300]!r}")
        return json.loads(b)

    def post_json(self, path, obj):
        return self.request("POST", path, json.dumps(obj),
                            {"Origin": f"http://{self.host}", "Content-Type": "application/json"})

    def stop(self):
        """SIGTERM: a clean end, exit 130 as `serve`."""
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(60)
        check(rc == 130, f"review exit code {rc} after SIGTERM; stderr: {''.join(self.stderr)}")


class Browser:
    """Debian's chromium, headless, sRGB output, through Playwright."""

    def __enter__(self):
        from playwright.sync_api import sync_playwright
        self.pw = sync_playwright().start()
        self.browser = self.pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                               args=["--force-color-profile=srgb"])
        self.context = self.browser.new_context(viewport={"width": 1400, "height": 900}, device_scale_factor=1)
        self.page = self.context.new_page()
        self.page.set_default_timeout(60000)
        return self

    def __exit__(self, *exc):
        self.browser.close()
        self.pw.stop()

    def open(self, url):
        self.page.goto(url)
        self.page.wait_for_function("() => window.ckReview && window.ckReview.ready === true")

    def wait_shown(self, frame, view, extra="true"):
        self.page.wait_for_function(
            f"() => {{ const s = window.ckReview.shown; return s && s.frame === {frame} && "
            f"s.view === '{view}' && !s.error && ({extra}); }}")

    def canvas(self, w, h):
        """The image's w x h pixels as the canvas holds them (the viewer at 1:1)."""
        data = self.page.evaluate(f"""(() => {{
            const v = window.ckReview.viewer;
            if (v.scale !== 1) throw new Error('not at 1:1: ' + v.scale);
            return Array.from(v.ctx.getImageData(v.ox, v.oy, {w}, {h}).data); }})()""")
        return np.array(data, dtype=np.int32).reshape(h, w, 4)[:, :, :3]

    def click_image(self, x, y, move_only=True):
        """The mouse onto image pixel (x, y) of the viewer."""
        box = self.page.locator("#view").bounding_box()
        o = self.page.evaluate("[window.ckReview.viewer.ox, window.ckReview.viewer.oy]")
        # Whole CSS pixels (the mouse lands on them), inside the image pixel's square.
        self.page.mouse.move(math.ceil(box["x"] + o[0] + x), math.ceil(box["y"] + o[1] + y))

    def open_clip(self, name):
        self.page.locator("#clips li", has_text=name).click()
        self.page.wait_for_function(f"() => window.ckReview.state.clip && window.ckReview.state.clip.name === '{name}'")

    def scrub(self, frame):
        self.page.locator("#scrub").evaluate(f"e => {{ e.value = {frame}; e.dispatchEvent(new Event('input')); }}")
