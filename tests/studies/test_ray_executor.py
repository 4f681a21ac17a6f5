"""`--executor ray`: the same study as on threads, one writer for the log, kill-and-resume.

One local Ray (two CPUs, on this machine; endpoints on 127.0.0.1) serves every test here.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

import mulligan.runs as runs_package
from mulligan.cli import main
from mulligan.errors import UserError
from mulligan.memory.log import EpisodeLog
from mulligan.report.stats import collect
from mulligan.runs import executors
from mulligan.studies import demo
from mulligan.testing import FakeOpenAIServer
from tests.helpers.chroma_server import chroma_server
from tests.helpers.killing import descends_from_us, processes_titled

__all__ = ["chroma_server"]  # a fixture

# a hang guard only: Ray starts a local cluster per test, slow on a loaded machine
pytestmark = pytest.mark.timeout(600)

for _key, _value in executors.QUIET_RAY.items():
    os.environ.setdefault(_key, _value)
os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # no token written under ~/.ray by tests


def task_file(kinds: set[str]) -> str:
    return "\n".join(
        f'- id: {t.id}\n  family: {t.kind}\n  prompt: "{t.prompt}"\n'
        f"  checks: [{{type: exact_match, answer: '{t.answer}'}}]"
        for t in demo.DEMO_TASKS
        if t.kind in kinds
    )


ALL = "react,retry,reflexion,reflexion-memory"


@pytest.fixture
def steady_tasks(tmp_path: Path) -> Path:
    """Without the tasks answered by try count: a model call cut off by a crash and asked
    again cannot change an answer, so a crashed run must end exactly as a whole one."""
    path = tmp_path / "steady.yaml"
    path.write_text(task_file({"easy", "units"}))
    return path


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    context = ray.init(
        num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False
    )
    yield context.address_info["gcs_address"]
    ray.shutdown()


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "demo.yaml"
    path.write_text(task_file({"easy", "flaky", "units"}))
    return path


def run_id(err: str) -> str:
    return re.findall(r"run id: (\w+)", err)[0]


def bench(
    tasks: Path, out: Path, strategies: str, *extra: str
) -> tuple[int, str, dict[str, list[int]]]:
    """A bench in this process on a fresh copy of the demo script."""
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        # reflexion-memory learns online here: its lessons are unverified, shown marked
        argv = [
            "bench", str(tasks), "--strategies", strategies, "--trials", "3",
            "--temperature", "0.7", "--base-url", server.base_url, "--out", str(out),
            "--embedding", "hash", "--seed", "7", "--show-candidates", *extra,
        ]  # fmt: skip
        code = main(argv)
        assert server.violations == []
    return code, (out / "report.md").read_text() if code == 0 else "", {}


def tables(report: str) -> list[list[str]]:
    """The report's table rows, without the one column that measures time."""
    rows, header = [], []
    for line in report.splitlines():
        if not line.startswith("|"):
            header = []
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        header = header or cells
        rows.append([c for c, name in zip(cells, header, strict=False) if name != "wall s/task"])
    return rows


def solved(out: Path, run: str) -> dict[str, list[int]]:
    log = EpisodeLog(out / "memory" / "episodes.db")
    return {s.label: s.solved_by_trial for s in collect(log, run).strategies}


def test_bench_on_ray_gives_the_verdicts_counts_and_tables_of_threads(
    ray_address: str, tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, threads_report, _ = bench(tasks, tmp_path / "threads", ALL, "--concurrency", "4")
    assert code == 0
    threads_id = run_id(capsys.readouterr().err)
    code, ray_report, _ = bench(
        tasks, tmp_path / "ray", ALL, "--concurrency", "4", "--executor", "ray"
    )
    assert code == 0
    ray_id = run_id(capsys.readouterr().err)

    counts = solved(tmp_path / "threads", threads_id)
    assert solved(tmp_path / "ray", ray_id) == counts
    assert counts["reflexion-memory"][0] > 0 and counts["reflexion"][-1] == 10  # lessons flowed
    assert tables(ray_report) == tables(threads_report) and len(tables(ray_report)) > 10

    def verdicts(out: Path, run: str) -> list[tuple[str, int, int, str]]:
        log = EpisodeLog(out / "memory" / "episodes.db")
        rows = log.db.execute(
            "select e.strategy, e.position, a.trial, a.passed, a.answer from attempts a"
            " join episodes e on e.id = a.episode_id where e.run_id = ? order by 1, 2, 3",
            [run],
        ).fetchall()
        return [tuple(row) for row in rows]

    assert verdicts(tmp_path / "ray", ray_id) == verdicts(tmp_path / "threads", threads_id)
    lessons = EpisodeLog(tmp_path / "ray" / "memory" / "episodes.db").lesson_events()
    assert {e["event"] for e in lessons} >= {"created", "retrieved", "helped"}


def test_run_on_ray_prints_the_verdicts_of_threads(
    ray_address: str, tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = []
    for executor in ("threads", "ray"):
        with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
            argv = [
                "run", str(tasks), "--strategy", "reflexion", "--trials", "2",
                "--base-url", server.base_url, "--memory", str(tmp_path / executor),
                "--embedding", "hash", "--concurrency", "3", "--executor", executor,
            ]  # fmt: skip
            assert main(argv) == 0
        printed.append(sorted(capsys.readouterr().out.splitlines()))
    assert printed[0] == printed[1] and any("units-1 (trial 2)" in line for line in printed[1])


def driver(server: FakeOpenAIServer, out: Path, tasks: Path, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}
    argv = [
        sys.executable, "-m", "mulligan.cli", "bench", str(tasks),
        "--strategies", "retry,reflexion", "--trials", "3", "--temperature", "0.7",
        "--base-url", server.base_url, "--out", str(out), "--embedding", "hash",
        "--concurrency", "2", "--seed", "7", *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def test_killed_driver_resumes_with_nothing_lost_and_nothing_done_twice(
    ray_address: str, steady_tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = steady_tasks
    on_ray = ("--executor", "ray", "--ray-address", ray_address)
    code, _, _ = bench(tasks, tmp_path / "whole", "retry,reflexion", "--concurrency", "2")
    assert code == 0
    whole_id = run_id(capsys.readouterr().err)

    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        killed = driver(server, tmp_path / "killed", tasks, *on_ray)
        deadline = time.monotonic() + 60
        while len(server.requests) < 14:  # inside the first strategy, episodes under way
            assert time.monotonic() < deadline and killed.poll() is None
            time.sleep(0.01)
        killed.send_signal(signal.SIGKILL)
        _, err = killed.communicate()
        killed_id = run_id(err)
        cut_short = EpisodeLog(tmp_path / "killed" / "memory" / "episodes.db")
        logged = cut_short.db.execute("select count(*) from attempts").fetchone()[0]
        whole_attempts = EpisodeLog(tmp_path / "whole" / "memory" / "episodes.db").db
        total = whole_attempts.execute("select count(*) from attempts").fetchone()[0]
        assert 0 < logged < total  # the driver wrote what workers sent before it died
        resumed = driver(server, tmp_path / "killed", tasks, *on_ray, "--resume", killed_id)
        _, err = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, err
        assert server.violations == []

    assert solved(tmp_path / "killed", killed_id) == solved(tmp_path / "whole", whole_id)

    def attempts(out: Path) -> list[tuple[str, int]]:
        db = EpisodeLog(out / "memory" / "episodes.db").db
        rows = db.execute(
            "select e.task_id || ':' || e.strategy, a.trial from attempts a"
            " join episodes e on e.id = a.episode_id order by 1, 2"
        ).fetchall()
        return [tuple(row) for row in rows]

    assert attempts(tmp_path / "killed") == attempts(tmp_path / "whole")


def test_a_missing_ray_is_one_line_before_any_work(
    tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed
    monkeypatch.delitem(sys.modules, "mulligan.runs.ray_executor", raising=False)
    monkeypatch.delattr(runs_package, "ray_executor", raising=False)
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        argv = [
            "bench", str(tasks), "--base-url", server.base_url, "--out", str(tmp_path / "out"),
            "--embedding", "hash", "--executor", "ray",
        ]  # fmt: skip
        assert main(argv) == 2
        assert server.requests == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'pip install "mulligan[ray]"' in err
    assert not (tmp_path / "out").exists()


def test_embedded_memory_refused_on_a_cluster_of_several_nodes(
    ray_address: str,
    tasks: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mulligan.runs import ray_executor

    monkeypatch.setattr(ray_executor.RayExecutor, "node_count", lambda self: 3)
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        argv = [
            "bench", str(tasks), "--base-url", server.base_url, "--out", str(tmp_path / "out"),
            "--embedding", "hash", "--executor", "ray", "--strategies", "reflexion-memory",
        ]  # fmt: skip
        assert main(argv) == 2
        assert server.requests == []
    err = capsys.readouterr().err
    assert "cluster has 3 nodes" in err and "--memory http://HOST:8000" in err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()


def test_which_memory_a_cluster_accepts() -> None:
    executors.check_memory_for_cluster(1, "/data/memory", uses_store=True)
    executors.check_memory_for_cluster(4, "http://chroma:8000", uses_store=True)
    executors.check_memory_for_cluster(4, "/data/memory", uses_store=False)  # log only
    with pytest.raises(UserError, match="chroma run --path DIR --port 8000"):
        executors.check_memory_for_cluster(2, "/data/memory", uses_store=True)


def test_workers_share_lessons_through_a_chroma_server_the_driver_never_opens(
    ray_address: str,
    chroma_server: str,
    tasks: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mulligan.memory.store import LessonStore

    code, threads_report, _ = bench(tasks, tmp_path / "threads", "reflexion-memory")
    assert code == 0
    threads_id = run_id(capsys.readouterr().err)

    def not_here(*args: object, **kwargs: object) -> None:
        raise AssertionError("the driver opened the lesson store")

    monkeypatch.setattr(LessonStore, "__init__", not_here)  # this process only, not the workers
    code, ray_report, _ = bench(
        tasks, tmp_path / "ray", "reflexion-memory", "--executor", "ray", "--memory", chroma_server
    )
    assert code == 0, capsys.readouterr().err
    ray_id = run_id(capsys.readouterr().err)
    monkeypatch.undo()

    counts = solved(tmp_path / "ray", ray_id)
    assert counts == solved(tmp_path / "threads", threads_id)
    assert counts["reflexion-memory"][0] >= 3 + 3  # later units tasks found the first one's lesson
    assert tables(ray_report) == tables(threads_report)
    from mulligan.memory import HashEmbedding

    stored = LessonStore(chroma_server, HashEmbedding()).all()
    assert {lesson.text for lesson in stored} >= {demo.UNITS_LESSON}


def episode_workers() -> list[int]:
    """The pids of the Ray actors running episodes (by their process title) in the cluster
    this process started (their raylet is its child): never those of another cluster on the
    machine, such as a test's running beside this one."""
    return [pid for pid in processes_titled(b"ray::_EpisodeWorker") if descends_from_us(pid)]


def test_a_lost_worker_is_replaced_and_its_episodes_resume_from_the_log(
    ray_address: str, steady_tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import threading

    tasks = steady_tasks
    code, _, _ = bench(tasks, tmp_path / "threads", "reflexion", "--concurrency", "4")
    assert code == 0
    threads_id = run_id(capsys.readouterr().err)
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        argv = [
            "bench", str(tasks), "--strategies", "reflexion", "--trials", "3", "--temperature",
            "0.7", "--base-url", server.base_url, "--out", str(tmp_path / "ray"),
            "--embedding", "hash", "--seed", "7", "--concurrency", "4", "--executor", "ray",
        ]  # fmt: skip
        codes: list[int] = []
        driver_thread = threading.Thread(target=lambda: codes.append(main(argv)))
        driver_thread.start()
        deadline = time.monotonic() + 60
        while len(server.requests) < 6 or not episode_workers():
            assert time.monotonic() < deadline and driver_thread.is_alive()
            time.sleep(0.01)
        os.kill(episode_workers()[0], signal.SIGKILL)
        driver_thread.join(timeout=120)
        assert codes == [0] and server.violations == []
    ray_id = run_id(capsys.readouterr().err)
    assert solved(tmp_path / "ray", ray_id) == solved(tmp_path / "threads", threads_id)

    def attempts(out: Path, run: str) -> list[tuple[str, int]]:
        db = EpisodeLog(out / "memory" / "episodes.db").db
        query = (
            "select e.task_id, a.trial from attempts a join episodes e on e.id = a.episode_id"
            " where e.run_id = ? order by 1, 2"
        )
        return [tuple(row) for row in db.execute(query, [run]).fetchall()]

    assert attempts(tmp_path / "ray", ray_id) == attempts(tmp_path / "threads", threads_id)


def test_a_loop_that_cannot_leave_this_process_is_one_clear_error(
    ray_address: str, tmp_path: Path
) -> None:
    import threading

    from mulligan.memory import HashEmbedding, Memory
    from mulligan.runs.ray_executor import RayExecutor
    from mulligan.runs.runner import run_tasks
    from mulligan.schema import ContainsCheck, Task

    live_connection = threading.Lock()  # as an MCP session's tools hold one
    memory = Memory(tmp_path / "memory", HashEmbedding())
    executor = RayExecutor(ray_address, concurrency=1)
    task = Task(id="t", prompt="Say ok.", checks=[ContainsCheck(text="ok")])
    try:
        with pytest.raises(UserError, match="need --executor threads"):
            run_tasks(
                lambda: live_connection,  # type: ignore[arg-type,return-value]
                [task], run_id="r", strategy="react", memory=memory, executor=executor,
            )  # fmt: skip
    finally:
        executor.close()
    assert memory.log.episodes() == []


def test_the_relay_keeps_each_senders_order_whatever_order_ray_delivers(ray_address: str) -> None:
    from mulligan.runs.ray_executor import _Relay

    relay = _Relay.remote()  # type: ignore[attr-defined]
    ray.get(relay.send.remote("worker-a", 1, b"step 2"))
    assert ray.get(relay.exchange.remote([], 0.05)) == []  # held until its predecessor comes
    ray.get(relay.send.remote("worker-b", 0, b"other"))
    ray.get(relay.send.remote("worker-a", 0, b"step 1"))
    assert ray.get(relay.exchange.remote([], 1.0)) == [
        (-1, b"other"), (-1, b"step 1"), (-1, b"step 2")
    ]  # fmt: skip
    ray.kill(relay)
