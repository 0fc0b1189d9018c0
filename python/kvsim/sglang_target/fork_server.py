"""The SGLang target's fork server (`python -m kvsim.sglang_target.driver --serve-forks`, and
the zygote's per-source servers: zygote.py): torch imported and SGLang loaded once, then one
forked driver per unit over the FIFOs the simulator names. The driver class and its protocol
loop come from the caller (driver.serve_forks), so a child runs the very module that started
the server, whichever name it was imported under."""

import importlib
import json
import os
import sys
import traceback


def _lines_while_parent_lives():
    """Standard input's lines, until it ends or the process that started this one is gone (a
    server whose kvsim was killed must not linger: it checks once a second)."""
    import select  # noqa: PLC0415
    parent = os.getppid()
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], 1.0)
        if not ready:
            if os.getppid() != parent:
                return
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            return
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.decode("utf-8")


def serve_forks(sglang_src, out, make_driver, serve, freeze_loaded):
    """A fork server: torch imported and SGLang loaded once (the 1-2 s a driver takes to start),
    then one forked driver per unit. Each child opens the two FIFOs it is given (input first,
    as the simulator opens them), serves one run and exits; the server answers the child's pid.
    A child starts from the server's state, in which the device and SGLang's modules are
    untouched, so it behaves as a fresh driver would. The server waits for its children (so that
    their CPU time counts in kvsim's, which waits for the server) and, when it ends, stops any
    still running (_end_children). make_driver(device, mods) makes a child's driver, serve(driver,
    inp, out) runs its protocol loop to an exit code, freeze_loaded() runs once SGLang is loaded."""
    from kvsim.fakecuda import FakeDevice  # noqa: PLC0415
    from kvsim.sglang_target import load_sglang  # noqa: PLC0415
    from kvsim.sglang_target.source import resolve_source  # noqa: PLC0415
    device = FakeDevice(seed=0)
    device.install()
    try:
        mods = load_sglang(resolve_source(sglang_src), device=device)
        # The driver's own modules that hello and the calls import: once here, not in every
        # child (an import there compiles or reads them again: ~0.1 s of each run's start).
        # (One that fails to import here fails again, with its message, where a child needs it.)
        for name in ("target", "checks", "content", "requests", "metadata", "hybrid", "hybrid_capabilities",
                     "retract_checks", "retract_pool"):
            try:
                importlib.import_module(f"kvsim.sglang_target.{name}")
            except ImportError:
                pass
        freeze_loaded()
        from kvsim.sglang_target.hybrid_capabilities import capabilities  # noqa: PLC0415
        out.write(json.dumps({"ok": True, "sglang": {"commit": mods.source.commit or "",
                                                     "capabilities": capabilities(mods)}}) + "\n")
    except Exception as exc:  # noqa: BLE001 - reported to the simulator, which stops
        out.write(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
        out.flush()
        return 2
    out.flush()
    children = set()
    try:
        _serve_fork_requests(out, device, mods, children, make_driver, serve)
    finally:
        _end_children(children)
    return 0


def _reap_children(children):
    """Waits for the children that have exited (no zombies left between two runs)."""
    for pid in sorted(children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done == pid:
            children.discard(pid)


def _end_children(children, grace_s=0.5):
    """At the server's end: children still running get grace_s to finish (a run's 'bye' closes
    its storage folder), then SIGKILL (within the 1 s kvsim gives the server before it kills it). A driver stuck in a call (a hunt worker killed for a hang
    closed its pipes, but the driver never reads again) or blocked opening FIFOs that kvsim never
    opened would otherwise outlive the hunt and take a core."""
    import signal  # noqa: PLC0415
    import time  # noqa: PLC0415
    deadline = time.monotonic() + grace_s  # wall time only bounds the wait; no run reads it
    while children and time.monotonic() < deadline:
        _reap_children(children)
        if children:
            time.sleep(0.02)
    for pid in sorted(children):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    children.clear()


def _serve_fork_requests(out, device, mods, children, make_driver, serve):
    """The fork server's loop: one forked driver per request line, its pid answered."""
    for line in _lines_while_parent_lives():
        _reap_children(children)
        try:
            request = json.loads(line)
            paths = request["fork"]
            fifo_in, fifo_out = str(paths["in"]), str(paths["out"])
            # A zygote's request (zygote.py) also names the run's stderr file and environment.
            err_path = str(paths["stderr"]) if paths.get("stderr") else None
            env = {str(k): str(v) for k, v in paths["env"].items()} if "env" in paths else None
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            out.write(json.dumps({"ok": False, "error": f"bad fork request: {exc}"}) + "\n")
            out.flush()
            continue
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            # The server's protocol pipes are not the child's: it talks over its FIFOs only.
            os.close(0)
            code = 0
            try:
                if err_path is not None:
                    os.dup2(os.open(err_path, os.O_WRONLY | os.O_APPEND), 2)
                os.dup2(2, 1)
                if env is not None:
                    os.environ.clear()
                    os.environ.update(env)
                with open(fifo_in, "r", encoding="utf-8") as inp, \
                        open(fifo_out, "w", encoding="utf-8") as child_out:
                    driver = make_driver(device, mods)
                    driver.exits_after_close = True
                    code = serve(driver, inp, child_out)
            except BaseException:  # noqa: BLE001 - a child never returns into the server loop
                traceback.print_exc()
                code = 2
            finally:
                sys.stderr.flush()
                os._exit(code)
        children.add(pid)
        out.write(json.dumps({"ok": True, "pid": pid}) + "\n")
        out.flush()
