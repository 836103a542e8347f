"""Run a user's Python model (``audit --python FILE:FUNC``) in a child process, under a time limit.

The parent never executes the user's code: a model that loops or sleeps is killed after
``--model-timeout`` seconds (exit 3, naming the limit), and a model that ends its process
(``os._exit(0)``, a crash of the interpreter, being killed) is reported as returning no result
(exit 2), never as a pass.  The child writes the user's prints to stderr, so they cannot mix
with a report or ``--json`` on stdout.

Protocol (one child per model): frames of an 8-byte little-endian length and a pickle, on the
child's original stdout (parent reads) and stdin (parent writes).  The child sends
``("ready", takes_arch, name)`` or ``("error", message)`` after importing FILE; then, per
call ``(args, kwargs)``, ``("ok", ndarray)`` or ``("error", message)``.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

#: default seconds one call of the model (or its import) may take
DEFAULT_TIMEOUT = 60.0


class ModelFailure(Exception):
    """The model's own code failed (raised, ended its process, returned nothing usable): exit 2.
    The message is complete (the audit reports it as is)."""

    model_message = True


class ModelTimeout(Exception):
    """The model did not answer within the time limit: exit 3.  It ends the audit (never a
    finding about one case)."""

    abort_audit = True


def _send(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(struct.pack("<Q", len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """n bytes from fd, or None at end of file; ModelTimeout past the deadline."""
    out = bytearray()
    while len(out) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ModelTimeout()
        chunk = os.read(fd, min(n - len(out), 1 << 20))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def _recv(fd: int, deadline: float | None):
    head = _read_exact(fd, 8, deadline)
    if head is None:
        raise EOFError
    body = _read_exact(fd, struct.unpack("<Q", head)[0], deadline)
    if body is None:
        raise EOFError
    return pickle.loads(body)


# ------------------------------------------------------------------------------------------
# the child


def _child(path: str, func: str) -> None:
    proto_out = os.dup(1)
    os.dup2(2, 1)                         # the user's prints go to stderr
    sys.stdout = sys.stderr
    proto_in = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)                   # the user's code reads no protocol bytes
    import inspect

    import numpy as np

    def fail(e: BaseException) -> tuple:
        return ("error", f"{type(e).__name__}: {e}")

    try:
        from . import InputError, load_user_function

        fn = load_user_function(f"{path}:{func}")
    except InputError as e:               # names the file and what is wrong with it
        _send(proto_out, ("error", str(e)))
        return
    except BaseException as e:  # noqa: BLE001  the user's import, os-level exits aside
        _send(proto_out, ("error", f"--python: {path} failed to import: {fail(e)[1]}"))
        return
    try:
        params = inspect.signature(fn).parameters
        takes_arch = "arch" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
    except (TypeError, ValueError):
        takes_arch = False
    _send(proto_out, ("ready", takes_arch, getattr(fn, "__name__", func)))
    while True:
        try:
            req = _recv(proto_in, None)
        except EOFError:
            return
        if req is None:
            return
        args, kw = req
        try:
            out = fn(*args, **kw)
            if hasattr(out, "get") and hasattr(out, "__cuda_array_interface__"):
                out = out.get()           # a CuPy array: bring it to the host
            reply = ("ok", np.asarray(out))
            if reply[1].dtype == object:
                reply = ("error", f"returned {type(out).__name__} that is not an array of integers")
        except BaseException as e:  # noqa: BLE001  SystemExit, KeyboardInterrupt: the model's failure
            reply = ("error", f"{getattr(fn, '__name__', func)} raised {fail(e)[1]}")
        try:
            _send(proto_out, reply)
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            _send(proto_out, fail(e))


# ------------------------------------------------------------------------------------------
# the parent


class SandboxedModel:
    """A callable that forwards ``model(opcode, *args, **kw)`` to FUNC in a child process."""

    def __init__(self, spec: str, timeout: float = DEFAULT_TIMEOUT):
        from . import InputError

        if ":" not in spec:
            raise InputError("--python takes FILE:FUNC")
        path, func = spec.rsplit(":", 1)
        if not Path(path).is_file():
            raise InputError(f"--python: no such file {path}")
        self.timeout = float(timeout)
        self.spec = spec
        root = str(Path(__file__).resolve().parent.parent.parent)     # the directory holding formal/
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        self.proc = subprocess.Popen([sys.executable, "-c", "import sys; from formal.cli.sandbox import _child; "
                                      "_child(sys.argv[1], sys.argv[2])", str(Path(path).resolve()), func],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                     start_new_session=True)      # Ctrl-C reaches us; we end the child
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        try:
            msg = self._reply(f"import {path}")
        except ModelFailure as e:
            raise InputError(f"--python: {path}: {e}") from None
        if msg[0] != "ready":
            self.close()
            raise InputError(msg[1])
        _, self.takes_arch, name = msg
        self.__name__ = str(name)
        import inspect

        # what the audit inspects to decide whether to pass arch= (as it would for FUNC itself)
        ps = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in ("opcode", "a", "b", "c")]
        ps += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None)
               for n in ("e", "sel") + (("arch",) if self.takes_arch else ())]
        self.__signature__ = inspect.Signature(ps)

    def _reply(self, what: str):
        try:
            return _recv(self._out, time.monotonic() + self.timeout)
        except ModelTimeout:
            self.close()
            raise ModelTimeout(f"the model did not {what} within --model-timeout {self.timeout:g} s "
                               f"(it was stopped)") from None
        except EOFError:
            code = self._end()
            how = (f"was killed by signal {-code}" if code is not None and code < 0 else
                   f"ended its process (exit code {code})")
            raise ModelFailure(f"the model {how} without returning a result") from None
        except (pickle.UnpicklingError, ValueError, struct.error) as e:
            self.close()
            raise ModelFailure(f"the model's process sent an unreadable reply: {type(e).__name__}") from None

    def _end(self):
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.close()
            return self.proc.returncode

    def __call__(self, opcode, *args, **kw):
        if self.proc.poll() is not None:
            raise ModelFailure(f"the model's process has ended (exit code {self.proc.returncode})")
        try:
            _send(self._in, ((opcode,) + tuple(args), kw))
        except (BrokenPipeError, OSError):
            code = self._end()
            raise ModelFailure(f"the model ended its process (exit code {code}) without returning a result") from None
        msg = self._reply("return")
        if msg[0] == "ok":
            return msg[1]
        raise ModelFailure(msg[1])

    def close(self) -> None:
        p = self.proc
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)    # its own session: any process it started goes too
            except (ProcessLookupError, PermissionError):
                p.kill()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (p.stdin, p.stdout):
            try:
                f.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
