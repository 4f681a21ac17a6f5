"""The python_tests harness: a standalone script (standard library only) run inside the box.

It runs as two processes, so that nothing the candidate does can write the verdict:

- the **judge** (this process) reads the candidate's code from stdin, forks the candidate's
  process, and only then reads the tests. It runs every test itself and writes the one report
  that counts to the report descriptor, which the candidate's process has closed before any
  of the candidate's code ran. The judge is not dumpable, so the candidate cannot read its
  memory or reopen its descriptors through /proc.
- the **candidate's process** holds the candidate's code and nothing of the tests. It answers
  calls over a socket: the judge's tests call proxies, the arguments travel there and the
  return value comes back as plain data (None, bool, int, float, complex, str, bytes and
  lists, tuples, dicts, sets of them, by exact type), so no returned object can run code in the
  judge or compare equal to anything.

Exiting, raising SystemExit, atexit hooks, signals or a killed interpreter therefore end in a
failed test or in no report at all, and no report is a failure.

Frames on stdin: an 8-byte big-endian length, then JSON: first {"candidate", "prelude"}, then
{"tests", "entry_point", "prelude"}. The report descriptor's number is in MULLIGAN_REPORT_FD.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import socket
import struct
import sys
import traceback
from typing import Any

MAX_FRAME = 64 << 20
MAX_DEPTH = 200
GOT = "got "
DETAIL = 300


class CandidateError(Exception):
    """The candidate's process failed a call in a way no test can expect (it exited, died...)."""


# ---------------------------------------------------------------- framing


def read_exactly(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> Any:
    (size,) = struct.unpack(">Q", read_exactly(fd, 8))
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes is too large")
    return json.loads(read_exactly(fd, size))


def write_frame(fd: int, value: Any) -> None:
    data = json.dumps(value).encode()
    os.write(fd, struct.pack(">Q", len(data)))
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# ---------------------------------------------------------------- plain data


def encode(value: Any, depth: int = 0) -> Any:
    """Plain data as tagged JSON; anything else is a TypeError (exact types only)."""
    if depth > MAX_DEPTH:
        raise TypeError("the value is nested too deeply to be checked")
    kind = type(value)
    if value is None:
        return ["N"]
    if kind is bool:
        return ["b", value]
    if kind is int:
        return ["i", str(value)]
    if kind is float:
        return ["f", repr(value)]
    if kind is complex:
        return ["c", repr(value.real), repr(value.imag)]
    if kind is str:
        return ["s", value]
    if kind is bytes:
        return ["y", value.hex()]
    tags: dict[Any, str] = {list: "l", tuple: "t", set: "S", frozenset: "F"}
    if kind in tags:
        return [tags[kind], [encode(item, depth + 1) for item in value]]
    if kind is dict:
        return ["d", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]]
    raise TypeError(f"a value of type {kind.__name__} cannot be checked; return plain data")


def decode(data: Any, depth: int = 0) -> Any:
    """The inverse of `encode`, building only plain data whatever the input."""
    if depth > MAX_DEPTH or not isinstance(data, list) or not data:
        raise ValueError("malformed value")
    tag, rest = data[0], data[1:]
    if tag == "N":
        return None
    if tag == "b":
        return bool(rest[0])
    if tag == "i":
        return int(str(rest[0]))
    if tag == "f":
        return float(str(rest[0]))
    if tag == "c":
        return complex(float(str(rest[0])), float(str(rest[1])))
    if tag == "s":
        return str(rest[0])
    if tag == "y":
        return bytes.fromhex(str(rest[0]))
    if tag == "d":
        return {decode(k, depth + 1): decode(v, depth + 1) for k, v in rest[0]}
    builders: dict[str, Any] = {"l": list, "t": tuple, "S": set, "F": frozenset}
    if tag in builders:
        return builders[tag](decode(item, depth + 1) for item in rest[0])
    raise ValueError(f"unknown value tag {tag!r}")


def short(text: str) -> str:
    return text if len(text) <= DETAIL else text[:DETAIL] + "..."


def describe(exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:  # the candidate's exception may not even print
        message = ""
    return f"{type(exc).__name__}: {short(message)}" if message else type(exc).__name__


# ---------------------------------------------------------------- the candidate's side


def serve_candidate(sock: socket.socket, source: str) -> None:
    """Load the candidate, say which names it defines, then answer calls until told to stop."""
    fd = sock.fileno()
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    try:
        defined = [
            node.name
            for node in ast.parse(source).body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        ]
        exec(compile(source, "<candidate>", "exec"), namespace)
    except BaseException as exc:
        lines = traceback.format_exception_only(type(exc), exc)
        write_frame(fd, ["load-error", short("".join(lines).strip())])
        return
    write_frame(fd, ["ready", [name for name in defined if callable(namespace.get(name))]])
    while True:
        try:
            name, args, kwargs = read_frame(fd)
        except EOFError:
            return
        try:
            value = namespace[name](*decode(args), **decode(kwargs))
            reply = ["ok", encode(value)]
        except BaseException as exc:
            reply = ["raise", type(exc).__name__, describe(exc)]
        write_frame(fd, reply)


def start_candidate(source: str, report_fd: int) -> tuple[int, socket.socket]:
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the candidate's process: give up every way back to the verdict first
        ours.close()
        os.close(0)
        os.close(report_fd)
        try:
            serve_candidate(theirs, source)
        finally:
            os._exit(0)
    theirs.close()
    return pid, ours


# ---------------------------------------------------------------- the judge's side


class Candidate:
    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid, self.sock, self.ended = pid, sock, ""

    def receive(self) -> Any:
        try:
            return read_frame(self.sock.fileno())
        except (EOFError, OSError, ValueError) as exc:
            raise CandidateError(self.end_state(f"gave a broken reply ({exc})")) from None

    def end_state(self, otherwise: str) -> str:
        """How the candidate's process ended, when it did."""
        if not self.ended:
            try:
                done, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                return f"the candidate's process {otherwise}"
            if os.WIFSIGNALED(status):
                self.ended = f"was killed by signal {os.WTERMSIG(status)}"
            else:
                self.ended = f"exited with status {os.WEXITSTATUS(status)}"
        return f"the candidate's process {self.ended} before answering"

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.ended:
            raise CandidateError(f"the candidate's process {self.ended} before answering")
        try:
            write_frame(self.sock.fileno(), [name, encode(args), encode(kwargs)])
        except TypeError as exc:
            raise CandidateError(
                f"the tests pass {name} a value that cannot be sent: {exc}"
            ) from None
        except OSError:
            raise CandidateError(self.end_state("is gone")) from None
        reply = self.receive()
        if reply[0] == "ok":
            return decode(reply[1])
        raise exception_named(str(reply[1]), str(reply[2]))


def exception_named(name: str, message: str) -> BaseException:
    """The candidate's exception as the built-in exception of that name, when it is a plain one."""
    found = getattr(builtins, name, None)
    plain = isinstance(found, type) and issubclass(found, Exception)
    if plain and name not in ("AssertionError", "StopIteration", "StopAsyncIteration"):
        return found(message)  # type: ignore[misc, operator, no-any-return]
    return CandidateError(f"the candidate raised {message}")


def proxy(candidate: Candidate, name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        return candidate.call(name, args, kwargs)

    call.__name__ = call.__qualname__ = name
    return call


def finished(tests: int, failures: list[str]) -> dict[str, Any]:
    """The judge's report: every test ran (`tests` of them), these failed."""
    return {"complete": True, "tests": tests, "failures": failures}


def run_tests(
    candidate: Candidate, tests: str, entry_point: str | None, prelude: str, reveal: bool = True
) -> dict[str, Any]:
    """Every test, run here against proxies. Without `reveal`, a failure names the test by
    its number and line, never its source or message (they may hold the expected value);
    what the candidate returned ("got ...") is the candidate's own and is always shown."""
    ready = candidate.receive()
    if ready[0] != "ready":
        return finished(0, [f"the candidate does not load: {ready[1]}"])
    defined: list[str] = ready[1]
    if entry_point and entry_point not in defined:
        return finished(0, [f"the candidate does not define {entry_point}"])
    namespace: dict[str, Any] = {"__name__": "__tests__"}
    exec(compile(prelude, "<prelude>", "exec"), namespace)
    trusted = set(namespace) | set(dir(builtins))  # the task's helpers and Python's own
    for name in defined:  # a candidate's `abs` or `encode_cyclic` never replaces the real one
        if name == entry_point or name not in trusted:
            namespace[name] = proxy(candidate, name)
    module = ast.parse(tests)
    defines_check = any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in module.body)
    if entry_point and defines_check:
        module.body.append(ast.parse(f"check({entry_point})").body[0])
    total, failures, lines = 0, [], tests.splitlines()
    for node in module.body:
        is_test = isinstance(node, ast.Assert) or (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
        )
        total += is_test
        if reveal:
            source = short(ast.unparse(node))
        else:
            source = f"test {total} (line {node.lineno})" if is_test else f"line {node.lineno}"
        try:
            run_statement(node, namespace)
        except AssertionError as exc:
            said = str(exc) if reveal or str(exc).startswith(GOT) else ""
            said = f" -- {short(said)}" if said else ""
            failures.append(f"FAILED: {source}{where(exc, lines, reveal)}{said}")
        except CandidateError as exc:
            failures.append(f"ERROR: {source}{where(exc, lines, reveal)} -- {exc}")
            if candidate.ended:
                break
        except Exception as exc:
            said = describe(exc) if reveal else type(exc).__name__
            failures.append(f"ERROR: {source}{where(exc, lines, reveal)} -- {said}")
            if not is_test:
                failures.append("the tests could not run past this statement")
                break
    return finished(total, failures)


def where(exc: BaseException, lines: list[str], reveal: bool = True) -> str:
    """The innermost line of the tests that raised, when it is not the statement itself."""
    found = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<tests>"]
    if len(found) < 2 or not found[-1] or found[-1] > len(lines):
        return ""
    shown = f": {short(lines[found[-1] - 1].strip())}" if reveal else ""
    return f" (line {found[-1]}{shown})"


def run_statement(node: ast.stmt, namespace: dict[str, Any]) -> None:
    """Run one top-level statement; an `assert x == y` reports what x was."""
    test = node.test if isinstance(node, ast.Assert) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        got = eval(compile(ast.Expression(test.left), "<tests>", "eval"), namespace)
        want = eval(compile(ast.Expression(test.comparators[0]), "<tests>", "eval"), namespace)
        if not got == want:
            raise AssertionError(GOT + short(repr(got)))
        return
    exec(compile(ast.Module(body=[node], type_ignores=[]), "<tests>", "exec"), namespace)


def not_dumpable() -> None:
    """Keep the candidate (same user) out of this process's memory and descriptors."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_dumpable = 4
        ctypes.CDLL(None).prctl(pr_set_dumpable, 0, 0, 0, 0)


def main() -> None:
    not_dumpable()
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    report_fd = int(os.environ["MULLIGAN_REPORT_FD"])
    first = read_frame(0)
    pid, sock = start_candidate(first["prelude"] + "\n\n" + first["candidate"], report_fd)
    second = read_frame(0)
    os.close(0)
    try:
        report = run_tests(
            Candidate(pid, sock),
            second["tests"],
            second["entry_point"],
            second["prelude"],
            bool(second.get("reveal", True)),
        )
    except BaseException as exc:  # the judge's own failure is a failed verdict, said plainly
        failure = f"the harness failed: {describe(exc)}"
        report = {"complete": False, "tests": 0, "failures": [failure]}
    sock.close()
    write_frame(report_fd, report)
    os.close(report_fd)
    os._exit(0)


if __name__ == "__main__":
    main()
