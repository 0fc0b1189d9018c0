"""A zygote for the SGLang target's drivers: one warm process that many kvsim processes share.

    PYTHONHASHSEED=0 python -m kvsim.sglang_target.zygote --socket PATH
    KVSIM_SGLANG_ZYGOTE=PATH kvsim replay t.jsonl --sglang-src bundle:TAG   # (and run, hunt, ...)

Each kvsim process otherwise starts its own driver (or fork server), which imports torch (~1.2 s)
and loads SGLang's cache modules (~0.5-1 s) before a run of often ~0.3 s. The zygote imports
torch once; per source (and environment) it forks a fork server (driver.serve_forks: SGLang
loaded once), and each kvsim run gets a driver forked from that server, over FIFOs, exactly as
from the server kvsim starts itself: a fresh driver per run, in the same state.

Protocol: one request per connection on the Unix socket, one JSON line each way.
  {"python", "src", "cwd", "env": {...}, "in", "out", "stderr"}  -> {"ok": true, "pid": N}
  {"python", "src", "cwd", "env": {...}, "greet": true}          -> {"ok": true, "sglang": {...}}
`env` is the environment kvsim would give a driver it starts; the driver (and its server) run with
exactly that environment, in `cwd`. What cannot change after the interpreter started must match
the zygote's own (the interpreter, PYTHONHASHSEED, PYTHONPATH's entries), or the request is
refused ({"ok": false, "error"}), and kvsim starts its driver itself as without a zygote. The
zygote ends when the process that started it is gone, or its standard input ends where that is a
pipe (as a test fixture starts it)."""

import argparse
import json
import os
import select
import socket
import stat
import sys

import torch  # noqa: F401 - imported once here, before any fork

from kvsim.sglang_target import driver as _driver

# Environment variables that do not make a server of their own: pytest names the running test in
# PYTEST_CURRENT_TEST. (A driver still runs with the requester's value of every variable.)
_KEY_IGNORES = ("PYTEST_CURRENT_TEST",)
MAX_SERVERS = 16


def _path_entries(value):
    seen = []
    for entry in (value or "").split(":"):
        entry = os.path.realpath(entry) if entry else ""
        if entry and entry not in seen:
            seen.append(entry)
    return seen


def _mismatch(request):
    """Why a driver forked here would not be the one the requester would start, or None."""
    env = request.get("env")
    if not isinstance(env, dict):
        return "no environment"
    if os.path.realpath(str(request.get("python", ""))) != os.path.realpath(sys.executable):
        return f"interpreter {request.get('python')!r}, the zygote's is {sys.executable!r}"
    if env.get("PYTHONHASHSEED") != os.environ.get("PYTHONHASHSEED"):
        return f"PYTHONHASHSEED {env.get('PYTHONHASHSEED')!r}, the zygote's {os.environ.get('PYTHONHASHSEED')!r}"
    if _path_entries(env.get("PYTHONPATH")) != _path_entries(os.environ.get("PYTHONPATH")):
        return f"PYTHONPATH {env.get('PYTHONPATH')!r}, the zygote's {os.environ.get('PYTHONPATH')!r}"
    return None


class _Server:
    """A fork server (driver.serve_forks) for one source, cwd and environment, forked from here."""

    def __init__(self, src, cwd, env, inherited=()):
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 2
            try:
                for fd in (req_w, rep_r, *inherited):  # the zygote's: a sibling's pipe kept
                    os.close(fd)                       # open here would never see its end
                os.dup2(req_r, 0)
                os.close(req_r)
                os.chdir(cwd)
                os.environ.clear()
                os.environ.update(env)
                out = os.fdopen(rep_w, "w", encoding="utf-8")
                sys.stdout = sys.stderr
                args = argparse.Namespace(sglang_src=src, content_every=_driver.CONTENT_EVERY)
                code = _driver.serve_forks(args, out)
            except BaseException:  # noqa: BLE001 - a child never returns into the zygote's loop
                import traceback  # noqa: PLC0415
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(code)
        os.close(req_r)
        os.close(rep_w)
        self.pid = pid
        self.to_server = os.fdopen(req_w, "w", encoding="utf-8")
        self.from_server = os.fdopen(rep_r, "r", encoding="utf-8")
        self.greeting = self._read("its start")

    def _read(self, what):
        line = self.from_server.readline()
        if not line:
            raise RuntimeError(f"the fork server ended at {what}")
        return json.loads(line)

    def call(self, request):
        self.to_server.write(json.dumps(request) + "\n")
        self.to_server.flush()
        return self._read("a fork request")

    def close(self):
        """Ends the server (it stops its children still running) and waits for it."""
        try:
            self.to_server.close()
        except OSError:
            pass
        self.from_server.close()
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


class Zygote:
    def __init__(self, listener=None):
        self.servers = {}  # key -> _Server, oldest first
        self.listener = listener
        self.conn = None  # the connection being answered

    def server(self, request):
        env = {str(k): str(v) for k, v in request["env"].items()}
        src, cwd = str(request["src"]), str(request.get("cwd") or os.getcwd())
        key = json.dumps([src, cwd, sorted((k, v) for k, v in env.items() if k not in _KEY_IGNORES)])
        s = self.servers.get(key)
        if s is not None and os.waitpid(s.pid, os.WNOHANG)[0] == s.pid:
            del self.servers[key]  # it died: start another
            s = None
        if s is None:
            inherited = [fd for t in self.servers.values()
                         for fd in (t.to_server.fileno(), t.from_server.fileno())]
            inherited += [x.fileno() for x in (self.listener, self.conn) if x is not None]
            s = _Server(src, cwd, env, inherited)
            if not s.greeting.get("ok", False):
                s.close()
                raise RuntimeError(s.greeting.get("error", "the fork server did not start"))
            while len(self.servers) >= MAX_SERVERS:
                self.servers.pop(next(iter(self.servers))).close()
            self.servers[key] = s
        return s, env

    def answer(self, request):
        why = _mismatch(request)
        if why is not None:
            return {"ok": False, "error": f"zygote: {why}"}
        s, env = self.server(request)
        if request.get("greet"):
            return {"ok": True, "sglang": s.greeting.get("sglang", {})}
        fork = {"in": str(request["in"]), "out": str(request["out"]), "env": env}
        if request.get("stderr"):
            fork["stderr"] = str(request["stderr"])
        return s.call({"fork": fork})

    def close(self):
        while self.servers:
            self.servers.popitem()[1].close()


def _serve_one(zygote, conn):
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    try:
        reply = zygote.answer(json.loads(data.split(b"\n", 1)[0]))
    except Exception as exc:  # noqa: BLE001 - refused; the requester starts its own driver
        reply = {"ok": False, "error": f"zygote: {type(exc).__name__}: {exc}"}
    conn.sendall((json.dumps(reply) + "\n").encode("utf-8"))


def serve(path):
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(path):
        os.unlink(path)
    listener.bind(path)
    listener.listen(64)
    zygote = Zygote(listener)
    watched = [listener] + ([0] if stat.S_ISFIFO(os.fstat(0).st_mode) else [])
    try:
        while True:
            ready, _, _ = select.select(watched, [], [], 1.0)
            if 0 in ready and not os.read(0, 4096):
                return 0
            if not ready and os.getppid() != parent:
                return 0
            if listener in ready:
                conn, _ = listener.accept()
                with conn:
                    zygote.conn = conn
                    try:
                        _serve_one(zygote, conn)
                    except OSError:
                        pass  # the requester went away; it starts its own driver
                    zygote.conn = None
    finally:
        listener.close()
        try:
            os.unlink(path)
        except OSError:
            pass
        zygote.close()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kvsim.sglang_target.zygote", description=__doc__.split("\n")[0])
    parser.add_argument("--socket", required=True, help="the Unix socket to listen on (KVSIM_SGLANG_ZYGOTE)")
    args = parser.parse_args(argv)
    sys.stdout = sys.stderr
    return serve(args.socket)


if __name__ == "__main__":
    sys.exit(main())
