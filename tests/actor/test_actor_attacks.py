"""Hostile review of the actor's promises: budgets, tool-call pairing, feedback not crashes,
compression and usage counting. Each test asserts what the design promises."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from mulligan.actor import Actor, ActorSettings, BudgetSection, CompressionSection, tool
from mulligan.llm.base import ChatResponse
from mulligan.schema import Attempt, Step, ToolCall, Usage
from mulligan.testing import ScriptedModel, orphan_problems, reply, tool_call
from tests.helpers.long_task import SUMMARISER_MARK

HUGE_INT = "1" + "0" * 5000  # past Python's int-conversion limit: json raises ValueError
DEEP = "[" * 50_000 + "]" * 50_000  # json raises RecursionError


@tool
def add(a: int, b: int) -> str:
    """Use to add two integers."""
    return str(a + b)


@tool
def echo(text: Any) -> str:
    """Use to echo a value."""
    return repr(text)[:50]


def run(model: ScriptedModel, tools=(add,), resume=None, **settings: object) -> Attempt:
    actor = Actor(model, ActorSettings(**settings))  # type: ignore[arg-type]
    return actor.run("t", "What is 2 + 3?", list(tools), resume=resume)


def paired(attempt: Attempt) -> None:
    """Every call of every step has exactly one result carrying its id, in call order."""
    for step in attempt.steps:
        assert [r.call_id for r in step.results] == [c.id for c in step.tool_calls], step


def test_a_budget_of_one_step_asks_for_the_answer_without_tools() -> None:
    with ScriptedModel(["5"]) as model:
        attempt = run(model, budget=BudgetSection(max_steps=1))
    assert model.calls[0].tools is None and attempt.answer == "5" and attempt.final_forced


def test_max_cost_zero_makes_no_call() -> None:
    attempt = run(model := ScriptedModel(), budget=BudgetSection(max_cost=0))
    assert attempt.stop_reason == "max_cost" and model.calls == []


def test_max_format_errors_reached_exactly() -> None:
    with ScriptedModel(["hmm"]) as model:
        attempt = run(model, protocol="text", budget=BudgetSection(max_format_errors=1))
    assert attempt.stop_reason == "format_errors" and len(model.calls) == 1
    with ScriptedModel(["hmm", "Final Answer: 5"]) as model:
        attempt = run(model, protocol="text", budget=BudgetSection(max_format_errors=2))
    assert attempt.stop_reason == "answered" and attempt.answer == "5"


def fold_policy(summary: ChatResponse, actor_usage: Usage, turns: int = 4):  # type: ignore[no-untyped-def]
    """Actor turns read pages (~240 tokens each) until `turns`, then answer."""

    def policy(messages: list[dict[str, Any]], tools: Any) -> ChatResponse:
        if SUMMARISER_MARK in str(messages[0]["content"]):
            return summary
        done = sum(1 for m in messages if m["role"] == "assistant")
        if done >= turns or tools is None:
            return ChatResponse(text="done", usage=actor_usage)
        call = tool_call("read_page", page=len(messages))
        return ChatResponse(text="", tool_calls=[call], usage=actor_usage)

    return policy


@tool
def read_page(page: int) -> str:
    """Read a page."""
    return f"page {page}: " + "lorem ipsum " * 80


SMALL = CompressionSection(threshold_tokens=300, keep_recent=1, summary_max_tokens=50)


def test_no_actor_call_is_sent_after_the_summariser_used_up_the_token_budget() -> None:
    """Budgets are checked before every model call: a fold's cost counts before the turn."""
    summary = ChatResponse(text="- read pages", usage=Usage(prompt_tokens=100_000))
    policy = fold_policy(summary, Usage(prompt_tokens=100, completion_tokens=10), turns=10)
    model = ScriptedModel(policy=policy)
    settings = ActorSettings(
        compression=SMALL, budget=BudgetSection(max_tokens=50_000, max_steps=20)
    )
    attempt = Actor(model, settings).run("t", "Read.", [read_page])
    kinds = ["S" if SUMMARISER_MARK in str(c.messages[0]["content"]) else "A" for c in model.calls]
    first_fold = kinds.index("S")
    assert attempt.stop_reason == "max_tokens"
    assert "A" not in kinds[first_fold + 1 :], f"actor called after the budget was gone: {kinds}"


def test_a_summariser_reply_with_empty_text_is_still_counted() -> None:
    spent = Usage(prompt_tokens=777, completion_tokens=3)
    policy = fold_policy(ChatResponse(text="   ", usage=spent), Usage(prompt_tokens=10))
    attempt = Actor(model := ScriptedModel(policy=policy), ActorSettings(compression=SMALL)).run(
        "t", "Read.", [read_page]
    )
    summariser_calls = sum(SUMMARISER_MARK in str(c.messages[0]["content"]) for c in model.calls)
    assert summariser_calls >= 1 and attempt.compressions
    assert attempt.compressions[0].method == "extractive"
    got = attempt.usage_by_role.get("summariser", Usage())
    assert got.prompt_tokens == 777 * summariser_calls, "the summariser's tokens were dropped"


def test_a_reply_with_text_and_a_tool_call_runs_the_call_and_keeps_the_text() -> None:
    with ScriptedModel([reply("Let me add.", tool_call("add", a=2, b=3)), "5"]) as model:
        attempt = run(model)
    assert attempt.steps[0].kind == "act" and attempt.steps[0].text == "Let me add."
    assert attempt.steps[0].results[0].output == "5" and attempt.answer == "5"


@pytest.mark.parametrize("empty", ["Final Answer:", "Final Answer:   \n", "**Final Answer:**"])
def test_an_empty_labelled_answer_is_not_an_answer_in_the_native_protocol(empty: str) -> None:
    attempt = run(ScriptedModel([empty, "5"]))
    assert attempt.answer != "", f"{empty!r} was taken as the (empty) final answer"


@pytest.mark.parametrize("blank", ["", "   ", "\n\t\n"])
def test_a_blank_reply_is_a_format_error(blank: str) -> None:
    with ScriptedModel([blank, "5"]) as model:
        attempt = run(model)
    assert attempt.steps[0].kind == "format_error" and attempt.answer == "5"


def test_text_protocol_final_answer_then_an_action_answers_without_the_action() -> None:
    text = 'Final Answer: 5\nAction: add\nAction Input: {"a": 1, "b": 1}'
    with ScriptedModel([text]) as model:
        attempt = run(model, protocol="text")
    assert attempt.stop_reason == "answered"
    assert attempt.answer == "5", f"answer carries the action text: {attempt.answer!r}"


def test_odd_call_ids_each_get_one_result() -> None:
    long_id = "x" * 10_000
    turns = [
        reply("", ToolCall(id="", name="add", arguments='{"a": 1, "b": 1}')),
        reply("", ToolCall(id=long_id, name="add", arguments='{"a": 1, "b": 2}')),
        reply("", ToolCall(id="same", name="add", arguments='{"a": 1, "b": 3}')),
        reply("", ToolCall(id="same", name="add", arguments='{"a": 1, "b": 4}')),
        "done",
    ]
    with ScriptedModel(turns) as model:
        attempt = run(model)
    paired(attempt)
    assert all(c.id for s in attempt.steps for c in s.tool_calls)
    assert [s.results[0].output for s in attempt.steps[:4]] == ["2", "3", "4", "5"]
    assert orphan_problems(model.calls[-1].messages) == []


@pytest.mark.parametrize(
    "arguments",
    [
        "[1, 2]",
        "null",
        "42",
        '"x"',
        json.dumps({"a": "y" * 1_000_000, "b": 1}),
        '{"a": ' + HUGE_INT + ', "b": 1}',
        DEEP,
    ],  # fmt: skip
    ids=["array", "null", "number", "string", "huge", "huge-int", "deep"],
)
def test_strange_arguments_are_error_observations(arguments: str) -> None:
    model = ScriptedModel([reply("", ToolCall(id="c", name="add", arguments=arguments)), "ok"])
    attempt = run(model)  # must not raise: a model's mistake is feedback
    result = attempt.steps[0].results[0]
    assert result.status == "error" and len(result.output) < 5000
    assert orphan_problems(model.calls[1].messages) == []


@pytest.mark.parametrize(
    "protocol, text",
    [
        ("text", "Action: echo\nAction Input: " + HUGE_INT),
        ("text", 'Action: echo\nAction Input: {"text": ' + HUGE_INT + "}"),
        ("native", '{"name": "echo", "arguments": {"text": ' + HUGE_INT + "}}"),
        ("native", '<tool_call>{"name": "echo", "arguments": {"text": ' + HUGE_INT + "}}"),
    ],
    ids=["text-bare", "text-object", "native-bare-json", "native-hermes"],
)
def test_a_reply_holding_a_huge_number_does_not_crash_the_actor(protocol: str, text: str) -> None:
    final = "Final Answer: ok" if protocol == "text" else "ok"
    attempt = run(ScriptedModel([text, final]), tools=(echo,), protocol=protocol)  # no raise
    assert attempt.stop_reason == "answered"
    paired(attempt)


def tool_returning(value: Any):  # type: ignore[no-untyped-def]
    @tool
    def give() -> Any:
        """Use to get a value."""
        print("noise on stdout")
        return value

    return give


@pytest.mark.parametrize(
    "value", [b"bytes\xff", {"when": object(), "n": float("nan")}, None, 7],
    ids=["bytes", "dict-non-json", "none", "int"],
)  # fmt: skip
def test_non_str_tool_results_become_text(value: Any) -> None:
    with ScriptedModel([reply("", tool_call("give")), "ok"]) as model:
        attempt = run(model, tools=(tool_returning(value),))
    result = attempt.steps[0].results[0]
    assert result.status == "ok" and isinstance(result.output, str) and result.output


LOOP: list[Any] = []
LOOP.append(LOOP)


@pytest.mark.parametrize("value", [{(1, 2): "tuple key"}, LOOP], ids=["tuple-keys", "circular"])
def test_an_unserialisable_tool_result_is_an_observation_not_a_crash(value: Any) -> None:
    with ScriptedModel([reply("", tool_call("give")), "ok"]) as model:
        attempt = run(model, tools=(tool_returning(value),))  # must not raise
    result = attempt.steps[0].results[0]
    assert result.status in ("ok", "error") and result.output
    paired(attempt)


def test_keyboard_interrupt_in_a_tool_propagates() -> None:
    @tool
    def stop() -> str:
        """Use to stop."""
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(ScriptedModel([reply("", tool_call("stop"))]), tools=(stop,))


def test_a_single_step_over_the_threshold_keeps_calls_with_their_results() -> None:
    @tool
    def dump(n: int) -> str:
        """Use to dump a log."""
        return f"log {n} " + "z" * 3900

    turns = [reply("", tool_call("dump", n=i)) for i in range(4)]

    def policy(messages: list[dict[str, Any]], tools: Any) -> Any:
        if SUMMARISER_MARK in str(messages[0]["content"]):
            return "- dumped logs"
        return turns.pop(0) if turns else "done"

    model = ScriptedModel(policy=policy)
    attempt = Actor(model, ActorSettings(compression=SMALL)).run("t", "Dump.", [dump])
    assert attempt.stop_reason == "answered" and len(attempt.steps) == 5
    paired(attempt)
    for call in model.calls:
        assert orphan_problems(call.messages) == []


def orphan_step() -> Step:  # logged before the tool ran, then the process died
    return Step(index=0, tool_calls=[ToolCall(id="c0", name="add", arguments='{"a": 2, "b": 3}')])


def test_a_resumed_call_without_a_result_is_repaired_or_refused() -> None:
    model = ScriptedModel(["5"])
    try:
        attempt = run(model, resume=[orphan_step()])
    except ValueError as exc:  # refused clearly
        assert "result" in str(exc)
        return
    assert orphan_problems(model.calls[0].messages) == []
    paired(attempt)  # the attempt record itself has no call without a result


def test_an_interrupted_call_made_again_runs_instead_of_being_called_a_repeat() -> None:
    """The call never returned: telling the model it already made it hides the result."""
    resumed = [orphan_step().closed()]
    assert resumed[0].results[0].status == "interrupted"
    with ScriptedModel([reply("", tool_call("add", a=2, b=3)), "5"]) as model:
        attempt = run(model, resume=resumed)
    again = attempt.steps[1].results[0]
    assert again.status == "ok" and again.output == "5", again


def test_a_tool_is_cut_off_where_the_attempts_time_runs_out() -> None:
    """A tool's own timeout (60 s) is no licence to outlast the attempt's time budget."""
    release = threading.Event()

    @tool
    def stall() -> str:
        """Use to wait."""
        release.wait(30)
        return "finished"

    try:
        with ScriptedModel([reply("", tool_call("stall"))]) as model:
            attempt = run(model, [stall], budget=BudgetSection(max_seconds=0.5))
    finally:
        release.set()
    result = attempt.steps[0].results[0]
    assert attempt.stop_reason == "max_seconds" and result.status == "timeout"
    assert "the attempt's time ran out" in result.output


@pytest.mark.timeout(60)  # a hang guard: each read its whole reply at every brace, for minutes
@pytest.mark.parametrize("flood", ["{", '{"', '{"a"\n', '{"a":', '[{"a":', "["])
def test_a_megabyte_of_braces_is_read_as_a_format_error_not_a_hang(flood: str) -> None:
    text = flood * (1_000_000 // len(flood))
    budget = BudgetSection(max_reply_tokens=10**6, max_tokens=10**7)  # a cap ignored
    with ScriptedModel([text, "Final Answer: 5"]) as model:
        attempt = run(model, protocol="text", budget=budget)
    assert [s.kind for s in attempt.steps] == ["format_error", "final"]
    assert attempt.answer == "5"


@pytest.mark.parametrize(("max_steps", "forced"), [(2, True), (5, False)])
def test_a_resumed_answered_attempt_keeps_whether_the_budget_forced_its_answer(
    max_steps: int, forced: bool
) -> None:
    """Stopped after its final step was logged, before the attempt was: resumed, it is
    answered without a call, and its answer is as forced as it was."""
    budget = BudgetSection(max_steps=max_steps)
    with ScriptedModel([reply("", tool_call("add", a=2, b=3)), "5"]) as model:
        whole = run(model, budget=budget)
    assert (whole.answer, whole.final_forced) == ("5", forced)
    logged = [Step.model_validate_json(step.model_dump_json()) for step in whole.steps]
    with ScriptedModel([]) as model:
        resumed = run(model, resume=logged, budget=budget)
    assert model.calls == [] and resumed.stop_reason == "answered"
    assert (resumed.answer, resumed.final_forced) == ("5", forced)
