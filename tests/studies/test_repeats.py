"""A study run several times over (`bench --repeats K`): its pass@k and pass^k counted by hand
on a small set of outcomes, the mean and spread across repeats, the paired tests on the
pooled tasks, and a repeated run killed and resumed end to end on the scripted endpoint."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from mulligan.cli import main
from mulligan.llm.fake_server import FakeReply
from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.log import EpisodeLog
from mulligan.report.repeats import pass_at_k, pass_hat_k, repeat_summaries
from mulligan.report.report import write_report
from mulligan.report.stats import collect, pass_and_repeat
from mulligan.runs.runner import episode_id
from mulligan.schema import CheckResult, Verdict
from mulligan.studies import demo
from mulligan.testing import FakeOpenAIServer
from tests.helpers.logged_runs import log_repeats


def verdict(passed: bool) -> Verdict:
    checks = [
        CheckResult(type="t", name="v", passed=passed, score=float(passed)),
        CheckResult(type="t", name="h", visibility="hidden", passed=passed, score=float(passed)),
    ]
    return Verdict(passed=passed, score=float(passed), checks=checks)


RETRY = {"a": "TTT", "b": "TFF", "c": "FFF", "d": "TTF"}  # task: passed in repeats 1, 2, 3
REACT = {"a": "TTT", "b": "FFF", "c": "FFF", "d": "FFF"}


def logged(tmp_path: Path) -> tuple[Memory, str]:
    """Two strategies, four tasks, three repeats, one trial each: what each repeat submitted."""
    memory = Memory(tmp_path / "mem", HashEmbedding())
    by_repeat = {
        repeat: {
            strategy: {task: [verdict(runs[repeat - 1] == "T")] for task, runs in made.items()}
            for strategy, made in (("react", REACT), ("retry", RETRY))
        }
        for repeat in (1, 2, 3)
    }
    config = {"strategies": ["react", "retry"], "task_order": list(RETRY), "seed": 0,
              "repeats": 3, "config": {"loop": {"trials": 1, "stop": "honest"}}}  # fmt: skip
    log_repeats(memory.log, "hand", config, by_repeat)
    return memory, "hand"


def test_the_estimators_match_the_papers_formulas_on_one_task() -> None:
    # HumanEval's pass@k = 1 - C(n-c, k) / C(n, k); tau-bench's pass^k = C(c, k) / C(n, k)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - math.comb(3, 3) / math.comb(5, 3))  # 0.9
    assert pass_hat_k(5, 2, 3) == 0.0  # three passes cannot come from two
    assert pass_hat_k(5, 4, 3) == pytest.approx(math.comb(4, 3) / math.comb(5, 3))  # 0.4
    assert pass_at_k(3, 0, 1) == 0.0 and pass_at_k(3, 1, 3) == 1.0
    assert pass_hat_k(3, 3, 3) == 1.0 and pass_hat_k(3, 2, 3) == 0.0


def test_pass_at_k_and_pass_hat_k_of_a_repeated_study_counted_by_hand(tmp_path: Path) -> None:
    memory, run = logged(tmp_path)
    stats = write_report(memory.log, run, tmp_path / "out")
    summaries = {s.label: s for s in repeat_summaries(stats)}
    retry = summaries["retry"]
    # solved in repeat 1: a b d; repeat 2: a d; repeat 3: a. Mean 2 of 4, sample sd 1.
    assert retry.solved == [3, 2, 1] and retry.tasks == 4
    assert retry.mean == 2.0 and retry.sd == 1.0
    # per task c = 3, 1, 0, 2 passes of n = 3
    # pass^1 = 6/12; pass^2 = (3/3 + 0 + 0 + 1/3) / 4 = 1/3; pass^3: only a, every time = 1/4
    assert retry.pass_hat == pytest.approx([1 / 2, 1 / 3, 1 / 4])
    # pass@2 = (1 + (1 - 1/3) + 0 + 1) / 4 = 2/3; pass@3: a, b and d, at least once = 3/4
    assert retry.pass_at == pytest.approx([1 / 2, 2 / 3, 3 / 4])
    react = summaries["react"]
    assert react.solved == [1, 1, 1] and react.sd == 0.0
    assert react.pass_at == react.pass_hat == pytest.approx([1 / 4] * 3)

    text = (tmp_path / "out" / "report.md").read_text()
    assert "n = 4 tasks × 3 repeats" in text
    section = text.split("## Repeats")[1].split("\n## ")[0]
    assert (
        "| retry | 4 | 3, 2, 1 | 2.0 ± 1.0 (50% ± 25 pts) | 50% | 67% | 75% | 50% | 33% | 25% |"
        in section
    )
    assert (
        "| react | 4 | 1, 1, 1 | 1.0 ± 0.0 (25% ± 0 pts) | 25% | 25% | 25% | 25% | 25% | 25% |"
        in section
    )
    # the success table pools every task of every repeat: 6 of 12
    assert "| retry | 12 | 6/12 = 50% [25–75]" in text
    # paired on the pooled tasks, each task in each repeat one pair: both 3 (a thrice), only
    # retry 3 (b in repeat 1, d in repeats 1 and 2), neither 6; p = 2 / 2^3
    assert "| react | retry | 12 | 3 | 0 | 3 | 6 | 0.250 | +25 pts [" in text
    assert "| b | solved in 0 of 3 repeats | solved in 1 of 3 repeats |" in text
    outcomes = [json.loads(line) for line in (tmp_path / "out" / "outcomes.jsonl").open()]
    assert {(o["task"], o["repeat"]) for o in outcomes} == {
        (t, r) for t in RETRY for r in (1, 2, 3)
    }


def unfinished(tmp_path: Path, repeats: int) -> str:
    """retry over a, b, c: repeat 1 finished all three, repeat 2 only a and b, no other."""
    memory = Memory(tmp_path / "mem", HashEmbedding())
    made = {1: {"a": "T", "b": "T", "c": "T"}, 2: {"a": "T", "b": "F"}}
    by_repeat = {
        r: {"retry": {task: [verdict(v == "T")] for task, v in tasks.items()}}
        for r, tasks in made.items()
    }
    config = {"strategies": ["retry"], "task_order": ["a", "b", "c"], "seed": 0,
              "repeats": repeats, "config": {"loop": {"trials": 1, "stop": "honest"}}}  # fmt: skip
    log_repeats(memory.log, "part", config, by_repeat)
    write_report(memory.log, "part", tmp_path / "out")
    text = (tmp_path / "out" / "report.md").read_text()
    return text.split("## Repeats")[1].split("\n## ")[0]


def test_an_unfinished_repeated_run_counts_each_repeat_over_the_tasks_every_repeat_finished(
    tmp_path: Path,
) -> None:
    """c, finished in repeat 1 only, counts in no repeat: each figure is over a and b."""
    section = unfinished(tmp_path, repeats=2)
    # solved 2 then 1 of 2: mean 1.5 (75%), sd 0.71 (35 pts); a c = 2, b c = 1 of n = 2
    # pass@1 = pass^1 = 3/4; pass@2 = 2/2; pass^2 = (1 + 0) / 2
    assert "| retry | 2 | 2, 1 | 1.5 ± 0.7 (75% ± 35 pts) | 75% | 100% | 75% | 50% |" in section
    assert "in each of 2 repeats: 2, 1 of the 2 tasks every repeat finished; pass^2 50%" in (
        reported(tmp_path)
    )


def reported(tmp_path: Path) -> str:
    """What `mulligan report` prints of the run `unfinished` logged."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        argv = ["report", "part", "--out", str(tmp_path / "again")]
        assert main([*argv, "--memory", str(tmp_path / "mem")]) == 0
    return out.getvalue()


def test_a_repeated_run_no_task_of_which_every_repeat_finished_has_no_figures_yet(
    tmp_path: Path,
) -> None:
    section = unfinished(tmp_path, repeats=3)
    assert "| retry | 0 | 0, 0, 0 | – | – | – | – | – | – | – |" in section
    assert "in each of 3 repeats: no task finished in every repeat yet" in reported(tmp_path)


def test_a_study_run_once_reports_no_repeats(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "mem", HashEmbedding())
    config = {"strategies": ["retry"], "task_order": ["a"], "seed": 0,
              "config": {"loop": {"trials": 1, "stop": "honest"}}}  # fmt: skip
    log_repeats(memory.log, "once", config, {1: {"retry": {"a": [verdict(True)]}}})
    write_report(memory.log, "once", tmp_path / "out")
    text = (tmp_path / "out" / "report.md").read_text()
    assert "## Repeats" not in text and "repeats" not in text.split("## Per task")[1][:200]
    assert '"repeat"' not in (tmp_path / "out" / "outcomes.jsonl").read_text()


def test_each_repeat_has_its_own_episode_ids() -> None:
    ids = {episode_id("r", "retry", "HumanEval/0", repeat=k) for k in (1, 2, 3)}
    assert len(ids) == 3 and episode_id("r", "retry", "t") == "r:retry:t"
    assert [pass_and_repeat(i)[1] for i in sorted(ids)] == [1, 2, 3]


# ------------------------------------------------------------ end to end, killed and resumed

TASKS = "\n".join(
    f'- id: {t.id}\n  family: {t.kind}\n  prompt: "{t.prompt}"\n'
    f"  checks: [{{type: exact_match, answer: '{t.answer}'}}]"
    for t in demo.DEMO_TASKS
    if t.kind in ("easy", "flaky")
)


class HeldOnce(demo.DemoPolicy):
    """The demo's script (a flaky task is answered right from its second try on, by any
    strategy: so react's first repeat misses it and its second solves it), holding the
    reply to the `held`-th try at one flaky task until the process waiting is killed."""

    def __init__(self, held: int = 0) -> None:
        super().__init__()
        self.held = held
        self.arrived = threading.Event()

    def __call__(self, body: dict[str, Any]) -> FakeReply:
        reply = super().__call__(body)
        if self.held and self.tries["demo/flaky-2"] == self.held and not self.arrived.is_set():
            self.arrived.set()
            reply.delay = 60.0
        return reply


def bench(server: FakeOpenAIServer, out: Path, tasks: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "mulligan.cli", "bench", str(tasks),
        "--strategies", "react,retry", "--trials", "2", "--temperature", "0.7",
        "--repeats", "2", "--base-url", server.base_url, "--out", str(out),
        "--embedding", "hash", *extra,
    ]  # fmt: skip


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MULLIGAN_"))}


def by_repeat(log: EpisodeLog, run_id: str) -> dict[tuple[str, int], list[str]]:
    found: dict[tuple[str, int], list[str]] = {}
    for row in log.episodes(run_id):
        if row["passed"]:
            found.setdefault((row["strategy"], pass_and_repeat(row["id"])[1]), []).append(
                row["task_id"]
            )
    return {key: sorted(tasks) for key, tasks in sorted(found.items())}


def test_two_repeats_killed_in_the_second_and_resumed_end_as_a_whole_run(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS)
    with FakeOpenAIServer(policy=HeldOnce()) as server:
        whole = subprocess.run(
            bench(server, tmp_path / "whole", tasks),
            capture_output=True, text=True, timeout=120, env=environment(),
        )  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    whole_id = whole.stderr.split("run id:")[1].split()[0]
    policy = HeldOnce(held=3)  # react repeat 1 tried it, retry's trial 2 too: repeat 2's react
    with FakeOpenAIServer(policy=policy) as server:
        argv = bench(server, tmp_path / "killed", tasks)
        process = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environment()
        )
        try:
            assert policy.arrived.wait(timeout=120), "the second repeat never started"
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        assert process.stderr is not None
        killed_id = process.stderr.readline().split("run id:")[1].strip()
        log = EpisodeLog(tmp_path / "killed" / "memory" / "episodes.db")
        assert {pass_and_repeat(row["id"])[1] for row in log.episodes(killed_id)} == {1, 2}
        resumed = subprocess.run(
            [*argv, "--resume", killed_id],
            capture_output=True, text=True, timeout=120, env=environment(),
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        assert server.violations == []
    whole_log = EpisodeLog(tmp_path / "whole" / "memory" / "episodes.db")
    log = EpisodeLog(tmp_path / "killed" / "memory" / "episodes.db")
    rows = log.episodes(killed_id)
    assert len(rows) == len({row["id"] for row in rows}) == 2 * 2 * 6  # repeats, strategies, tasks
    easy = [f"demo/easy-{i}" for i in (1, 2, 3)]
    flaky = [f"demo/flaky-{i}" for i in (1, 2, 3)]
    expected = {
        ("react", 1): easy,  # each flaky task's first try is wrong
        ("react", 2): sorted(easy + flaky),  # its own trial 1 again, each flaky task's third try
        ("retry", 1): sorted(easy + flaky),  # continues from react's trial 1: right at trial 2
        ("retry", 2): sorted(easy + flaky),
    }
    assert by_repeat(log, killed_id) == by_repeat(whole_log, whole_id) == expected
    summaries = {s.label: s for s in repeat_summaries(collect(log, killed_id))}
    assert summaries["react"].solved == [3, 6]
    assert summaries["react"].pass_hat == [pytest.approx(0.75), 0.5]  # (3 * 2 + 3 * 1) / 12
    assert summaries["react"].pass_at == [pytest.approx(0.75), 1.0]
    report = (tmp_path / "killed" / "report.md").read_text()
    assert "## Repeats" in report and "n = 6 tasks × 2 repeats" in report


def test_a_resume_with_other_repeats_is_refused(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS.split("\n- id: demo/easy-2")[0])
    with FakeOpenAIServer(policy=demo.DemoPolicy()) as server:
        argv = bench(server, tmp_path / "out", tasks)[3:]
        done = subprocess.run(
            [sys.executable, "-m", "mulligan.cli", *argv],
            capture_output=True, text=True, timeout=120, env=environment(),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        run_id = done.stderr.split("run id:")[1].split()[0]
        again = [*argv, "--repeats", "3", "--resume", run_id]
        assert main(again) == 2


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--strategies", "react,reflexion-memory"], "reflexion-memory"),
        (["--strategies", "react,select[memory]"], "select[memory]"),
        (["--passes", "2"], "--passes"),
        (["--learn-on", "sample:1"], "--learn-on"),
    ],
)
def test_repeats_refused_where_repeats_would_not_be_independent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], said: str
) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS)
    argv = ["bench", str(tasks), "--repeats", "2", "--base-url", "http://127.0.0.1:9/v1"]
    argv += ["--out", str(tmp_path / "out"), "--embedding", "hash", *extra]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "--repeats" in error and said in error
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("later", "extra"),
    [("x:repeat2", ["--repeats", "2"]), ("x:pass2", ["--passes", "2"])],
)
def test_two_tasks_whose_episodes_would_share_an_id_are_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], later: str, extra: list[str]
) -> None:
    """Task `x` in a later repeat or pass and task `x:repeat2` would be logged as one episode."""
    tasks = tmp_path / "tasks.yaml"
    one = "- {{id: '{}', prompt: Say hi., checks: [{{type: exact_match, answer: hi}}]}}\n"
    tasks.write_text(one.format("x") + one.format(later))
    argv = ["bench", str(tasks), "--strategies", "react", "--base-url", "http://127.0.0.1:9/v1"]
    argv += ["--out", str(tmp_path / "out"), "--embedding", "hash", *extra]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "'x'" in error and repr(later) in error and "rename" in error
    assert not (tmp_path / "out").exists()
