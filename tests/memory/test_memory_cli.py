"""The memory commands use the store's own embedding and mostly need none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mulligan.cli import main
from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.embeddings import EndpointEmbedding, spec_for
from mulligan.schema import Lesson, LessonScope


def a_store(directory: Path, embedder: object) -> Lesson:
    memory = Memory(directory, embedder)  # type: ignore[arg-type]
    lesson = Lesson(
        id="l1",
        text="Check the empty list before taking its first element.",
        scope=LessonScope(family="code"),
    )
    memory.keep(lesson, persistent=True)
    return lesson


class VectorsOnly:
    """An endpoint's embeddings, here without an endpoint: a store built 'with openai'."""

    def embed(self, texts: list[str]) -> list[list[float]]:
        return HashEmbedding(64).embed(texts)


@pytest.fixture
def no_minilm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Were the default embedding loaded, it would fail: nothing here may need it."""
    import mulligan.memory.embeddings as embeddings

    def refuse(self: object, *args: object, **kwargs: object) -> None:
        raise AssertionError("the minilm model was loaded")

    monkeypatch.setattr(embeddings.MiniLMEmbedding, "__init__", refuse)
    monkeypatch.delenv("MULLIGAN_EMBEDDING", raising=False)
    monkeypatch.chdir(tmp_path)


def test_list_show_export_stats_need_no_embedding(
    tmp_path: Path, no_minilm: None, capsys: pytest.CaptureFixture[str]
) -> None:
    a_store(tmp_path / "m", EndpointEmbedding(VectorsOnly(), "text-embedding-3-small"))  # type: ignore[arg-type]
    where = ["--memory", str(tmp_path / "m")]
    assert main(["memory", "list", *where]) == 0
    assert "Check the empty list" in capsys.readouterr().out
    assert main(["memory", "show", "l1", *where]) == 0
    assert "l1" in capsys.readouterr().out
    assert main(["memory", "export", *where]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["id"] == "l1"
    assert main(["memory", "stats", *where]) == 0
    assert f"1 lessons in {tmp_path / 'm'}" in capsys.readouterr().out
    assert main(["memory", "retract", "l1", *where]) == 0
    assert "retracted l1" in capsys.readouterr().out


def test_an_id_pasted_with_spaces_around_it_is_the_lesson_and_a_part_of_one_is_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_store(tmp_path / "m", HashEmbedding())
    where = ["--memory", str(tmp_path / "m")]
    assert main(["memory", "show", " l1\n", *where]) == 0
    assert capsys.readouterr().out.startswith("l1  failure")
    assert main(["memory", "show", "l", *where]) == 2
    assert "no lesson 'l' in" in capsys.readouterr().err
    assert main(["memory", "retract", "l1 ", *where]) == 0
    assert "retracted l1" in capsys.readouterr().out


def test_search_uses_the_embedding_the_store_was_built_with(
    tmp_path: Path, no_minilm: None, capsys: pytest.CaptureFixture[str]
) -> None:
    a_store(tmp_path / "m", HashEmbedding())
    assert (
        main(["memory", "search", "empty list first element", "--memory", str(tmp_path / "m")]) == 0
    )
    assert "Check the empty list" in capsys.readouterr().out


def test_an_explicit_other_embedding_is_refused_with_the_one_to_pass(
    tmp_path: Path, no_minilm: None, capsys: pytest.CaptureFixture[str]
) -> None:
    a_store(tmp_path / "m", HashEmbedding(64))
    status = main(["memory", "search", "x", "--memory", str(tmp_path / "m"), "--embedding", "hash"])
    err = capsys.readouterr().err
    assert status == 2
    assert "built with the hash-64 embedding; pass --embedding hash:64" in err


def test_search_in_a_store_built_on_an_endpoint_says_it_needs_one(
    tmp_path: Path, no_minilm: None, capsys: pytest.CaptureFixture[str]
) -> None:
    a_store(tmp_path / "m", EndpointEmbedding(VectorsOnly(), "small"))  # type: ignore[arg-type]
    assert main(["memory", "search", "x", "--memory", str(tmp_path / "m")]) == 2
    assert "--embedding openai needs an endpoint" in capsys.readouterr().err


def test_a_remote_store_is_named_by_its_url(tmp_path: Path) -> None:
    url = "http://127.0.0.1:8000"
    assert Memory(tmp_path, HashEmbedding(), store=url).where == url
    assert Memory(tmp_path, HashEmbedding()).where == str(tmp_path)


def test_store_names_map_back_to_the_flag_that_builds_them() -> None:
    assert spec_for("hash-512") == "hash"
    assert spec_for("hash-64") == "hash:64"
    assert spec_for("minilm") == "minilm"
    assert spec_for("openai-text-embedding-3-small") == "openai:text-embedding-3-small"


def test_retracting_a_lesson_twice_says_so_and_logs_it_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mulligan.memory.log import EpisodeLog

    a_store(tmp_path / "m", HashEmbedding())
    where = ["--memory", str(tmp_path / "m")]
    assert main(["memory", "retract", "l1", *where]) == 0
    assert capsys.readouterr().out.startswith("retracted l1")
    assert main(["memory", "retract", "l1", *where]) == 0
    assert capsys.readouterr().out.startswith("l1 was already retracted; nothing changed")
    events = EpisodeLog(tmp_path / "m" / "episodes.db", read_only=True).lesson_events("l1")
    assert [e["event"] for e in events].count("status:retracted") == 1


def test_a_retraction_killed_before_the_store_heard_of_it_reaches_the_store_when_run_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Killed (SIGKILL) with the retraction in the log, the store's copy not yet rewritten:
    the same retraction again says it was done, and the store's copy says so too (else it
    kept a place among the lessons retrieved, to be dropped there every time)."""
    from tests.helpers.killing import cli_code, killed, stopped_at

    a_store(tmp_path / "m", HashEmbedding())
    argv = ["memory", "retract", "l1", "--memory", str(tmp_path / "m")]
    point = "mulligan.memory.store:LessonStore.refresh"
    killed(stopped_at(point, 1, cli_code(argv), tmp_path / "reached"))
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("l1 was already retracted; nothing changed")
    assert Memory(tmp_path / "m", HashEmbedding()).store.get(["l1"])[0].validity.status == (
        "retracted"
    )


def test_a_store_lock_holding_garbage_is_written_over_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lock's generation only tells a process to reload the store: unreadable, it is
    taken as another's write, and the next write gives the file a generation again."""
    for n, garbage in enumerate([b"not a number\n", b"\xaf\xff\x00 not even text"]):
        a_store(tmp_path / f"m{n}", HashEmbedding())
        lock = tmp_path / f"m{n}" / "lessons" / "lessons.lock"
        lock.write_bytes(garbage)
        assert main(["memory", "retract", "l1", "--memory", str(tmp_path / f"m{n}")]) == 0
        assert capsys.readouterr().out.startswith("retracted l1")
        assert lock.read_text().strip().isdecimal()


def test_a_damaged_log_stops_a_command_that_writes_in_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its pages of lessons and lesson events garbage (the file still opens): retracting,
    running with the memory and resuming a study say which file is damaged and how to save
    what is left, in one line, instead of SQLite's traceback."""
    from mulligan.testing import FakeOpenAIServer, FakeReply
    from tests.helpers.logged_runs import garbage_pages

    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("- id: t\n  family: code\n  prompt: Say yes.\n"
                     "  checks: [{type: exact_match, answer: 'yes'}]\n")  # fmt: skip
    with FakeOpenAIServer(policy=lambda body: FakeReply(content="no")) as server:
        endpoint = ["--base-url", server.base_url, "--model", "m", "--embedding", "hash"]
        study = ["bench", str(tasks), "--out", str(tmp_path / "out"), *endpoint]
        assert main([*study, "--strategies", "reflexion-memory", "--trials", "2"]) == 0
        run_id = capsys.readouterr().err.split("run id:")[1].split()[0]
        a_store(tmp_path / "m", HashEmbedding())
        for log in (tmp_path / "m" / "episodes.db", tmp_path / "out" / "memory" / "episodes.db"):
            garbage_pages(log, ["lessons", "lesson_events", "episodes"])
        where = ["--memory", str(tmp_path / "m")]
        for argv, log in [
            (["memory", "retract", "l1", *where], tmp_path / "m" / "episodes.db"),
            (["run", str(tasks), "--strategy", "reflexion-memory", *endpoint, *where],
             tmp_path / "m" / "episodes.db"),
            ([*study, "--strategies", "reflexion-memory", "--trials", "2", "--resume", run_id],
             tmp_path / "out" / "memory" / "episodes.db"),
        ]:  # fmt: skip
            assert main(argv) == 2, argv
            err = capsys.readouterr().err.strip()  # (after the run id, for a run)
            said = err.splitlines()[-1]
            assert "Traceback" not in err and said.startswith(f"mulligan: {log} is unreadable")
            assert said.endswith("`sqlite3 episodes.db .recover`")


def test_an_export_killed_halfway_leaves_no_file_to_take_for_the_whole(tmp_path: Path) -> None:
    """Killed (SIGKILL) with one of three lessons written: --out does not exist (an import of
    it would have taken a part for the memory), and the next export writes it whole."""
    from tests.helpers.killing import cli_code, killed, stopped_at

    memory = Memory(tmp_path / "m", HashEmbedding())
    for n in range(3):
        memory.keep(Lesson(id=f"l{n}", text=f"Lesson number {n}."), persistent=True)
    out = tmp_path / "lessons.jsonl"
    argv = ["memory", "export", "--out", str(out), "--memory", str(tmp_path / "m")]
    killed(stopped_at("mulligan.schema:Lesson.model_dump_json", 2, cli_code(argv), tmp_path / "r"))
    assert not out.exists()
    assert main(argv) == 0
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["l0", "l1", "l2"]
