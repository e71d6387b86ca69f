#!/usr/bin/env python3
"""A client for `corridorkey-engine serve` (JSON-RPC 2.0, one object per line). Standard
library only: what a Nuke, Resolve or ComfyUI script imports.

    from corridorkey_client import Client
    with Client.spawn("corridorkey-engine", ["--device", "cpu"]) as ck:   # serve --stdio
        r = ck.key("plate.0001.exr", outputs={"matte": "/tmp/m.exr", "processed": "/tmp/p.exr"},
                   color="linear")
        ck.repost(r["frame_id"], outputs={"processed": "/tmp/p2.exr"}, despill=8)

    ck = Client.connect_unix("/run/user/1000/ck.sock")              # serve --listen unix:PATH
    ck = Client.connect_tcp("127.0.0.1", 8765, token_file="~/.ck-token")  # serve --listen tcp:

Errors come back as RpcError(code, message, data); data["exit_code"] is the exit code the
CLI gives for the same problem (2 usage, 3 input, 4 model or device).

As a command (`corridorkey_client.py --help`): key one frame, or send any method.
"""
import argparse
import itertools
import json
import os
import queue
import socket
import subprocess
import sys
import threading


class RpcError(Exception):
    def __init__(self, code, message, data=None):
        super().__init__(f"{message} (code {code})")
        self.code, self.message, self.data = code, message, data or {}


class Client:
    """One connection. Calls may come from several threads; replies are matched by id, and
    notifications (clip.event) go to the callback given to the call that caused them."""

    def __init__(self, reader, writer, closer=None, process=None):
        self._r, self._w, self._closer, self.process = reader, writer, closer, process
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending = {}  # id -> [Event, reply]
        self._listeners = {}  # job_id -> callback(event dict)
        self._closed = False
        self._unmatched = queue.Queue()  # replies to send_raw lines, id-less errors
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    # ---- connecting ----------------------------------------------------------------
    @classmethod
    def spawn(cls, engine="corridorkey-engine", args=(), env=None, stderr=None):
        """Starts `engine serve --stdio ARGS` as a child; it exits when this client closes."""
        p = subprocess.Popen([engine, "serve", "--stdio", *args], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=stderr, env=env)
        return cls(p.stdout, p.stdin, closer=None, process=p)

    @classmethod
    def connect_unix(cls, path, timeout=None):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(path)
        s.settimeout(None)
        return cls(s.makefile("rb"), s.makefile("wb"), closer=s)

    @classmethod
    def connect_tcp(cls, host, port, token=None, token_file=None, timeout=None):
        if token is None:
            with open(os.path.expanduser(token_file)) as f:
                token = f.read().strip()
        s = socket.create_connection((host, port), timeout=timeout)
        s.settimeout(None)
        c = cls(s.makefile("rb"), s.makefile("wb"), closer=s)
        c.call("server.auth", token=token)
        return c

    # ---- calls ---------------------------------------------------------------------
    def send(self, method, params=None, on_event=None, job_id=None):
        """Sends a request; returns its id for wait(). on_event receives the job's
        notifications (clip.event) as dicts."""
        rid = next(self._ids)
        params = dict(params or {})
        if on_event is not None:
            job_id = job_id or params.get("job_id") or f"py{os.getpid()}-{rid}"
            params["job_id"] = job_id
            self._listeners[job_id] = on_event
        slot = [threading.Event(), None]
        with self._lock:
            self._pending[rid] = slot
        self.send_raw(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        return rid

    def send_raw(self, line):
        """One line as is (tests send malformed ones)."""
        data = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else line
        with self._lock:
            self._w.write(data + b"\n")
            self._w.flush()

    def raw_reply(self, timeout=30):
        """The next reply that matches no call of this client (to a send_raw line)."""
        return self._unmatched.get(timeout=timeout)

    def wait(self, rid, timeout=None):
        slot = self._pending[rid]
        if not slot[0].wait(timeout):
            raise TimeoutError(f"no reply to request {rid} within {timeout} s")
        with self._lock:
            del self._pending[rid]
        reply = slot[1]
        if reply is None:
            raise ConnectionError("the server closed the connection before replying")
        if "error" in reply:
            e = reply["error"]
            raise RpcError(e.get("code"), e.get("message"), e.get("data"))
        return reply["result"]

    def call(self, method, timeout=None, on_event=None, **params):
        return self.wait(self.send(method, params, on_event=on_event), timeout)

    # ---- the methods -----------------------------------------------------------------
    def info(self):
        return self.call("engine.info")

    def load(self, checkpoint=None, checkpoint_blue=None, profile=None, **overrides):
        p = {k: v for k, v in (("checkpoint", checkpoint), ("checkpoint_blue", checkpoint_blue),
                               ("profile", profile)) if v is not None}
        return self.call("model.load", **p, **overrides)

    def key(self, plate, hint=None, outputs=None, **settings):
        """plate / hint: a path, or shm_image(...). outputs: {"matte"|"fg"|"processed"|
        "comp"|"hint": path or shm_image(...)}. settings: screen, color, despill, ..."""
        p = {"plate": plate, "outputs": outputs or {}, **settings}
        if hint is not None:
            p["hint"] = hint
        return self.call("frame.key", **p)

    def repost(self, frame_id, outputs=None, **settings):
        return self.call("frame.repost", frame_id=frame_id, outputs=outputs or {}, **settings)

    def key_clip(self, paths, on_event=None, job_id=None, **options):
        paths = [paths] if isinstance(paths, str) else list(paths)
        p = {"paths": paths, **options}
        if job_id:
            p["job_id"] = job_id
        rid = self.send("clip.key", p, on_event=on_event or (lambda e: None), job_id=job_id)
        return self.wait(rid)

    def cancel(self, job_id):
        return self.call("job.cancel", job_id=job_id)

    def shutdown(self):
        return self.call("server.shutdown")

    # ---- lifetime --------------------------------------------------------------------
    def close(self, timeout=60):
        """Closes the connection; a spawned server then finishes its work and exits.
        Returns its exit code (None for sockets)."""
        if self._closed:
            return self.process.returncode if self.process else None
        self._closed = True
        try:
            self._w.close()
        except OSError:
            pass
        if self._closer is not None:
            try:  # the reader's file still holds the socket: shut it down so the server sees EOF
                self._closer.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._closer.close()
        if self.process:
            return self.process.wait(timeout)
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _read(self):
        try:
            for raw in self._r:
                msg = json.loads(raw.decode("utf-8", "surrogateescape"))
                if "id" not in msg:  # a notification
                    params = msg.get("params", {})
                    cb = self._listeners.get(params.get("job_id"))
                    if cb:
                        cb(params)
                    continue
                with self._lock:
                    slot = self._pending.get(msg["id"])
                if slot is None:  # a reply to a line sent with send_raw, or an id-less error
                    self._unmatched.put(msg)
                    continue
                slot[1] = msg
                slot[0].set()
        except (OSError, ValueError):
            pass
        finally:
            with self._lock:
                for slot in self._pending.values():
                    slot[0].set()


def shm_image(name, width, height, channels, type="float32", stride=0):
    """The parameter that names a POSIX shared-memory block. `name` as Python's
    multiprocessing.shared_memory gives it (without the leading '/') or with it."""
    return {"shm": name if name.startswith("/") else "/" + name, "width": width, "height": height,
            "channels": channels, "type": type, "stride": stride}


def _json_or_text(v):
    try:
        return json.loads(v)
    except ValueError:
        return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", default="corridorkey-engine", help="the binary to spawn (serve --stdio)")
    ap.add_argument("--unix", help="connect to serve --listen unix:PATH instead")
    ap.add_argument("--serve-arg", action="append", default=[], help="extra argument for serve (repeat)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("key", help="key one frame")
    k.add_argument("plate")
    k.add_argument("--hint")
    for o in ("matte", "fg", "processed", "comp"):
        k.add_argument(f"--{o}", help=f"write the {o} here")
    k.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting (despill=5)")
    c = sub.add_parser("call", help="any method with JSON params")
    c.add_argument("method")
    c.add_argument("params", nargs="?", default="{}")
    a = ap.parse_args()
    client = Client.connect_unix(a.unix) if a.unix else Client.spawn(a.engine, a.serve_arg)
    try:
        if a.cmd == "key":
            outs = {o: getattr(a, o) for o in ("matte", "fg", "processed", "comp") if getattr(a, o)}
            # serve checks each setting's JSON type (despill is a number): a value that reads
            # as JSON (5, 0.5, true) goes as such, anything else as a string.
            settings = {k: _json_or_text(v) for k, v in (kv.split("=", 1) for kv in a.set)}
            r = client.key(a.plate, hint=a.hint, outputs=outs, **settings)
        else:
            r = client.call(a.method, **json.loads(a.params))
        print(json.dumps(r, indent=2))
        return 0
    except RpcError as e:
        print(f"error: {e}", file=sys.stderr)
        return (e.data or {}).get("exit_code", 1)
    except (ConnectionError, BrokenPipeError) as e:
        # The server is gone (it refused its arguments at start-up and said why on stderr,
        # or it died): one line and its exit status, not a traceback.
        code = client.process.wait() if getattr(client, "process", None) else None
        print(f"error: {e}" + (f" (serve exited with status {code})" if code is not None else ""), file=sys.stderr)
        return code if code else 1
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
