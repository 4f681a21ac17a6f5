"""Context compression: the view sent to the model stays under its threshold, each fold is
recorded, a failed summary falls back to an extractive one, the summary is capped, and long
observations are cut where they are made."""

from __future__ import annotations

from mulligan.actor import Actor, ActorSettings, BudgetSection, CompressionSection, tool
from mulligan.actor.context import extractive_summary
from mulligan.cli.display import trajectory
from mulligan.llm.tokens import TokenEstimator, raw_estimate
from mulligan.schema import Step, ToolCall, ToolResult
from mulligan.testing import ScriptedModel, orphan_problems
from tests.helpers.long_task import LONG_TASK_FACT, LongTaskScript, is_summary_request

PROMPT = "Read the pages one by one, then tell me the vault code."
THRESHOLD = 4000


def run_long(script: LongTaskScript, **compression: object):  # type: ignore[no-untyped-def]
    @tool
    def read_page(page: int) -> str:
        """Use to read one page."""
        return script.tool_output(page)

    model = ScriptedModel(policy=script.policy)
    settings = ActorSettings(
        budget=BudgetSection(max_steps=40, max_tokens=10**7),
        compression=CompressionSection(threshold_tokens=THRESHOLD, **compression),  # type: ignore[arg-type]
    )
    attempt = Actor(model, settings).run("long", PROMPT, [read_page])
    actor_calls = [c for c in model.calls if not is_summary_request(c.messages)]
    return attempt, actor_calls, model


def test_thirty_steps_never_send_a_view_over_the_threshold() -> None:
    attempt, calls, model = run_long(LongTaskScript(30))
    assert len(attempt.steps) == 30 and attempt.stop_reason == "answered"
    assert len(calls) == 30 and attempt.compressions
    for call in calls:
        assert raw_estimate(call.messages, call.tools) <= THRESHOLD
        assert PROMPT in call.messages[1]["content"]  # the task is pinned in every call
        assert orphan_problems(call.messages) == []  # no call is ever separated from its result
        assert call.messages[-1]["role"] in ("tool", "user")  # the most recent step is kept
    # a fact from step 2 is needed at step 30: it is there, through the summary
    assert "4417" in str(calls[-1].messages) and "4417" not in str(calls[-1].messages[2:])
    assert attempt.answer == "The code is 4417."
    # the attempt keeps every step verbatim
    assert LONG_TASK_FACT in attempt.steps[1].results[0].output
    assert [s.index for s in attempt.steps] == list(range(30))


def test_each_fold_is_recorded_and_shown() -> None:
    attempt, _, _ = run_long(LongTaskScript(30))
    event = attempt.compressions[0]
    assert event.method == "model" and event.folded_steps[0] == 0
    assert event.tokens_after < event.tokens_before
    folded = [i for e in attempt.compressions for i in e.folded_steps]
    assert folded == sorted(set(folded))  # every step folds once, oldest first
    assert "4417" in attempt.compressions[-1].summary
    shown = trajectory(attempt)
    assert "folded steps [0" in shown and "tokens" in shown


def test_fallback_folds_extractively_when_the_summariser_fails() -> None:
    attempt, calls, _ = run_long(LongTaskScript(30, fail_summaries=True))
    assert attempt.stop_reason == "answered"
    assert {e.method for e in attempt.compressions} == {"extractive"}
    assert all(raw_estimate(c.messages, c.tools) <= THRESHOLD for c in calls)
    assert "read_page" in attempt.compressions[0].summary
    assert attempt.answer == "The code is 4417."  # the first lines of results were kept


def test_compression_off_sends_everything() -> None:
    attempt, calls, _ = run_long(LongTaskScript(12), enabled=False)
    assert not attempt.compressions
    assert raw_estimate(calls[-1].messages, calls[-1].tools) > THRESHOLD


def test_summary_is_capped_with_head_and_tail() -> None:
    attempt, _, _ = run_long(LongTaskScript(30, fail_summaries=True), summary_max_tokens=300)
    last = attempt.compressions[-1].summary
    assert len(last) <= 300 * 4
    assert last.count("notes cut") == 1
    assert "4417" in last  # the head (first notes) is kept
    assert "step 24" in last  # and the latest


def test_extractive_summary_keeps_names_arguments_and_errors() -> None:
    step = Step(
        index=3,
        tool_calls=[ToolCall(id="a", name="python", arguments='{"code": "1/0"}')],
        results=[
            ToolResult(call_id="a", name="python", status="error", output="ZeroDivisionError\nmore")
        ],
    )
    text = extractive_summary([step])
    assert 'python({"code": "1/0"}) error: ZeroDivisionError' in text


def test_estimator_calibrates_to_reported_tokens() -> None:
    estimator = TokenEstimator()
    messages = [{"role": "user", "content": "x" * 4000}]
    raw = estimator.estimate(messages)
    for _ in range(6):
        estimator.calibrate(messages, None, reported=2 * raw)
    assert abs(estimator.estimate(messages) - 2 * raw) / (2 * raw) < 0.05


def test_long_observations_are_cut_at_the_source() -> None:
    @tool
    def dump() -> str:
        """Use to dump a log."""
        return "HEAD " + "x" * 50_000 + " TAIL"

    script = ["", "done"]
    from mulligan.testing import reply, tool_call

    with ScriptedModel([reply("", tool_call("dump")), script[1]]) as model:
        attempt = Actor(model).run("t", "dump", [dump])
    output = attempt.steps[0].results[0].output
    assert output.startswith("HEAD") and output.endswith("TAIL") and "characters cut" in output
    assert len(output) < 5000
