"""`mulligan view` from the command line: it serves on 127.0.0.1 at the URL it prints, with
headers that let no script run, answers an unknown page with 404 and a request for
another host name (DNS rebinding) with 421, stops on Ctrl-C with
status 130 and no traceback, and refuses bad input in one line (status 2) before serving:
a missing memory (not created), an unknown run, --bundle without a run, a port out of
range or taken."""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from mulligan.cli import main
from tests.helpers.read_only import read_only
from tests.helpers.terminal import ctrl_c_reaches_it
from tests.view.made import RUN, make_logged_run


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}


def test_serves_the_printed_url_and_ctrl_c_exits_130(tmp_path: Path) -> None:
    make_logged_run(tmp_path / "memory")
    command = [sys.executable, "-m", "mulligan.cli", "view", RUN, "--memory",
               str(tmp_path / "memory"), "--no-open"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=_env(), preexec_fn=ctrl_c_reaches_it)  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+)(/\S*)", line)
        assert found, line
        base, path = found.groups()
        assert path == f"/run/{RUN}"
        with urllib.request.urlopen(base + path, timeout=60) as answer:
            body = answer.read().decode()
            assert "script-src" not in answer.headers["Content-Security-Policy"]
            assert answer.headers["Content-Security-Policy"].startswith("default-src 'none'")
        assert 'data-task="t1"' in body
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(base + "/episode/nothing-here", timeout=60)
        assert missing.value.code == 404
        rebound = urllib.request.Request(base + path, headers={"Host": "evil.example:80"})
        with pytest.raises(urllib.error.HTTPError) as refused:  # a page on another name
            urllib.request.urlopen(rebound, timeout=60)
        assert refused.value.code == 421
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert "Traceback" not in out + err


def test_a_missing_memory_is_one_line_and_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = tmp_path / "nowhere"
    assert main(["view", "--memory", str(where), "--no-open"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--memory" in err
    assert not where.exists()


def test_an_unknown_run_and_a_bundle_without_a_run_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_logged_run(tmp_path / "memory")
    memory = str(tmp_path / "memory")
    assert main(["view", "no-such-run", "--memory", memory, "--no-open"]) == 2
    assert "no run 'no-such-run'" in capsys.readouterr().err
    assert main(["view", "--memory", memory, "--bundle", str(tmp_path / "b")]) == 2
    assert "--bundle" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
    assert main(["view", RUN, "--memory", memory, "--bundle", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "index.html").is_file()


def test_a_port_out_of_range_or_taken_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_logged_run(tmp_path / "memory")
    memory = str(tmp_path / "memory")
    assert main(["view", "--memory", memory, "--no-open", "--port", "70000"]) == 2
    assert "--port 70000" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["view", "--memory", memory, "--no-open", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"--port {port}: already in use on 127.0.0.1" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("refused", "says"),
    [
        (errno.EACCES, "--port 80: this user may not listen on it (ports below 1024 need root);"
         " pick a port above 1024, or leave --port out for a free one"),
        (errno.EADDRNOTAVAIL, "--port 80: cannot listen on 127.0.0.1 ("),
    ],
    ids=["not-permitted", "other"],
)  # fmt: skip
def test_view_says_why_it_cannot_listen_on_the_port_as_serve_does(
    refused: int,
    says: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A port below 1024 without root is named as needing root (the tests run as root, so
    the refusal is the socket's, simulated); another refusal gives the system's reason."""
    make_logged_run(tmp_path / "memory")

    def bind(self: socket.socket, address: tuple[str, int]) -> None:
        raise OSError(refused, os.strerror(refused))

    monkeypatch.setattr(socket.socket, "bind", bind)
    assert main(["view", "--memory", str(tmp_path / "memory"), "--no-open", "--port", "80"]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert ("need root" in err) == (refused == errno.EACCES)


def test_a_bundle_under_a_file_or_in_a_directory_without_write_permission_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_logged_run(tmp_path / "memory")
    memory = str(tmp_path / "memory")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "locked").mkdir()
    with read_only(tmp_path / "locked"):
        for bundle in (
            tmp_path / "notes.txt" / "b",
            tmp_path / "locked",
            tmp_path / "locked" / "b",
        ):
            assert main(["view", RUN, "--memory", memory, "--bundle", str(bundle)]) == 2, bundle
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and f"--bundle {bundle}" in err
    assert (tmp_path / "notes.txt").read_text() == "mine" and not any(
        (tmp_path / "locked").iterdir()
    )
