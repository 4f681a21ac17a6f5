"""Every call mulligan makes is capped in length: a reply that degenerates (a local model
repeating itself) stops at the cap instead of running until the server's context is full,
holding a slot and the episode for many minutes."""

from __future__ import annotations

import json
from pathlib import Path

from mulligan.evaluator.checks import CheckContext, check_llm_judge
from mulligan.llm.base import SHORT_REPLY_TOKENS
from mulligan.llm.scripted import ScriptedModel
from mulligan.memory import HashEmbedding, Memory
from mulligan.memory.curator import Curator
from mulligan.reflector import Reflector
from mulligan.schema import Attempt, CheckResult, Lesson, LLMJudgeCheck, Task, Verdict


def test_the_reflector_the_curator_and_a_judge_ask_for_a_short_reply(tmp_path: Path) -> None:
    task = Task(id="t", family="f", prompt="Add two numbers.")
    attempt = Attempt(task_id="t", trial=1, answer="3")
    failed = CheckResult(type="exact_match", name="c", passed=False, score=0.0, detail="4")
    verdict = Verdict.of([failed], feedback="expected 4")
    written = json.dumps({"diagnosis": "Wrong sum.", "lesson": "Check the arithmetic twice."})
    reflecting = ScriptedModel([written])
    Reflector(reflecting).reflect(task, attempt, verdict, [])

    judging = ScriptedModel([json.dumps({"pass": True, "reason": "fine"})])
    check_llm_judge(LLMJudgeCheck(rubric="is it a sum"), CheckContext(task, attempt, None, judging))

    curating = ScriptedModel([json.dumps({"lesson": "Check arithmetic twice."})])
    memory = Memory(tmp_path / "m", embedder=HashEmbedding())
    lesson = Lesson(id="l1", text="In this problem, add the two numbers carefully.", kind="failure")
    Curator(memory, curating).curate([lesson], {"t": task}, "tag")

    calls = [*reflecting.calls, *judging.calls, *curating.calls]
    assert [len(m.calls) for m in (reflecting, judging, curating)] == [1, 1, 1]
    assert all(call.max_tokens == SHORT_REPLY_TOKENS for call in calls), [
        call.max_tokens for call in calls
    ]
