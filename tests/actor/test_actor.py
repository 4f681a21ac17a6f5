"""The ReAct actor's loop: a finished attempt keeps its whole trajectory; unknown tools, bad
arguments, exceptions and unreadable replies come back as observations; the step budget asks
for a final answer on the last call."""

from __future__ import annotations

import json
import threading
import time

from mulligan.actor import Actor, ActorSettings, BudgetSection, tool
from mulligan.cli.display import trajectory
from mulligan.errors import ModelError
from mulligan.llm.base import ChatResponse
from mulligan.schema import Attempt, ToolCall, Usage
from mulligan.testing import ScriptedModel, orphan_problems, reply, tool_call


@tool
def add(a: int, b: int) -> str:
    """Use to add two integers."""
    return str(a + b)


@tool
def boom() -> str:
    """Use never: it always fails."""
    raise RuntimeError("the tool broke")


def run(model: ScriptedModel, tools=(add,), **settings: object):
    actor = Actor(model, ActorSettings(**settings))  # type: ignore[arg-type]
    return actor.run("t1", "What is 2 + 3?", list(tools))


def test_normal_finish_records_the_trajectory() -> None:
    with ScriptedModel([reply("", tool_call("add", a=2, b=3)), "5"]) as model:
        attempt = run(model)
    assert attempt.stop_reason == "answered"
    assert attempt.answer == "5"
    assert [s.kind for s in attempt.steps] == ["act", "final"]
    assert attempt.steps[0].results[0].output == "5"
    assert attempt.steps[0].results[0].status == "ok"
    assert attempt.usage.prompt_tokens > 0
    # the second call saw the tool result paired with its call, and "" content, not null
    second = model.calls[1].messages
    assert orphan_problems(second) == []
    assistant = next(m for m in second if m.get("tool_calls"))
    assert assistant["content"] == ""
    assert model.calls[0].tools and model.calls[0].tools[0]["function"]["name"] == "add"


def test_unknown_tool_then_recovery() -> None:
    with ScriptedModel(
        [reply("", tool_call("multiply", a=2, b=3)), reply("", tool_call("add", a=2, b=3)), "5"]
    ) as model:
        attempt = run(model)
    first = attempt.steps[0].results[0]
    assert first.status == "error" and "unknown tool 'multiply'" in first.output
    assert "add" in first.output  # names the tools that exist
    assert attempt.answer == "5"


def test_malformed_arguments_then_recovery() -> None:
    bad_json = ToolCall(id="c1", name="add", arguments='{"a": 2, "b": ')
    wrong_type = ToolCall(id="c2", name="add", arguments='{"a": "two", "b": 3}')
    with ScriptedModel(
        [reply("", bad_json), reply("", wrong_type), reply("", tool_call("add", a=2, b=3)), "5"]
    ) as model:
        attempt = run(model)
    assert attempt.steps[0].results[0].status == "error"
    assert "not valid JSON" in attempt.steps[0].results[0].output
    assert "a:" in attempt.steps[1].results[0].output
    assert attempt.steps[2].results[0].output == "5"
    assert attempt.stop_reason == "answered"


def test_a_model_that_edits_the_messages_it_is_given_changes_no_later_view() -> None:
    def editing(planned: ChatResponse | str):
        def policy(messages: list[dict[str, object]], tools: object) -> ChatResponse | str:
            for message in messages:
                message["content"] = "edited"
            return planned

        return policy

    first, second = reply("", tool_call("add", a=2, b=3)), reply("", tool_call("add", a=5, b=1))
    with ScriptedModel([editing(first), editing(second), "6"]) as model:
        attempt = run(model)
    assert attempt.answer == "6"
    third = model.calls[2].messages
    assert [m["content"] for m in third if m["role"] == "tool"] == ["5", "6"]
    assert "What is 2 + 3?" in third[1]["content"]


def test_tool_exception_is_an_observation() -> None:
    with ScriptedModel([reply("", tool_call("boom")), "gave up"]) as model:
        attempt = run(model, tools=(boom,))
    result = attempt.steps[0].results[0]
    assert result.status == "error" and "RuntimeError: the tool broke" in result.output


def test_parse_failures_are_capped() -> None:
    with ScriptedModel(["I think maybe", "still thinking", "hmm"]) as model:
        attempt = run(model, protocol="text", budget=BudgetSection(max_format_errors=3))
    assert attempt.stop_reason == "format_errors"
    assert attempt.answer is None
    assert len(model.calls) == 3
    reminder = model.calls[1].messages[-1]["content"]
    assert "Action:" in reminder and "Final Answer:" in reminder


def test_format_error_count_resets_after_a_good_turn() -> None:
    script = ["hmm", 'Action: add\nAction Input: {"a": 1, "b": 1}', "hmm", "Final Answer: 2"]
    with ScriptedModel(script) as model:
        attempt = run(model, protocol="text", budget=BudgetSection(max_format_errors=2))
    assert attempt.stop_reason == "answered" and attempt.answer == "2"


def test_step_budget_asks_for_the_final_answer_on_the_last_call() -> None:
    calls = [reply("", tool_call("add", a=i, b=1)) for i in range(2)]
    with ScriptedModel([*calls, "my best guess: 5"]) as model:
        attempt = run(model, budget=BudgetSection(max_steps=3))
    assert len(model.calls) == 3
    assert model.calls[0].tools and model.calls[1].tools
    assert model.calls[2].tools is None  # no tools offered on the last call
    assert "no budget left" in model.calls[2].messages[-1]["content"]
    assert attempt.answer == "my best guess: 5"
    assert attempt.final_forced


def test_step_budget_without_an_answer_stops_with_max_steps() -> None:
    with ScriptedModel([reply("", tool_call("add", a=1, b=1)), ""]) as model:
        attempt = run(model, budget=BudgetSection(max_steps=2))
    assert attempt.stop_reason == "max_steps"
    assert attempt.answer is None


def test_token_budget() -> None:
    heavy = Usage(prompt_tokens=400, completion_tokens=100)
    script = [
        ChatResponse(text="", tool_calls=[tool_call("add", a=i, b=1)], usage=heavy)
        for i in range(5)
    ]
    model = ScriptedModel(script)
    attempt = run(model, budget=BudgetSection(max_tokens=1200))
    assert attempt.stop_reason == "max_tokens"
    assert attempt.usage.total_tokens <= 1500
    assert model.calls[-1].tools is None  # the call that would use the budget up was the final one


def test_time_budget() -> None:
    @tool
    def slow() -> str:
        """Use to wait."""
        time.sleep(0.3)
        return "done"

    script = [reply("", tool_call("slow", call_id=f"s{i}")) for i in range(20)]
    model = ScriptedModel(script)
    attempt = Actor(model, ActorSettings(budget=BudgetSection(max_seconds=0.5, max_steps=50))).run(
        "t", "wait", [slow]
    )
    assert attempt.stop_reason == "max_seconds"
    assert len(attempt.steps) < 20


def test_model_error_ends_the_attempt_with_its_message() -> None:
    model = ScriptedModel([ModelError("endpoint answered HTTP 500 after 4 tries: boom")])
    attempt = run(model)
    assert attempt.stop_reason == "model_error"
    assert "HTTP 500" in attempt.error


def test_parallel_calls_run_concurrently_and_pair_ids() -> None:
    barrier = threading.Barrier(2, timeout=5)

    @tool(read_only=True)
    def weather(city: str) -> str:
        """Use to get today's high temperature of a city."""
        barrier.wait()  # only returns if both calls run at the same time
        return json.dumps({"city": city, "high_c": {"Beijing": 31, "Shanghai": 28}[city]})

    turn = reply(
        "",
        ToolCall(id="a", name="weather", arguments='{"city": "Beijing"}'),
        ToolCall(id="b", name="weather", arguments='{"city": "Shanghai"}'),
    )
    with ScriptedModel([turn, "Beijing, by 3 degrees"]) as model:
        attempt = Actor(model).run("w", "Which is hotter?", [weather])
    results = attempt.steps[0].results
    assert [r.call_id for r in results] == ["a", "b"]
    assert "Beijing" in results[0].output and "Shanghai" in results[1].output
    tool_messages = [m for m in model.calls[1].messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["a", "b"]


def test_duplicate_call_ids_from_a_server_are_made_unique() -> None:
    turn = reply(
        "",
        ToolCall(id="x", name="add", arguments='{"a": 1, "b": 1}'),
        ToolCall(id="x", name="add", arguments='{"a": 2, "b": 2}'),
    )
    with ScriptedModel([turn, "ok"]) as model:
        attempt = run(model)
    assert [r.output for r in attempt.steps[0].results] == ["2", "4"]
    assert orphan_problems(model.calls[1].messages) == []


def test_hermes_style_text_tool_calls_are_recovered() -> None:
    hermes = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    with ScriptedModel([hermes, "5"]) as model:
        attempt = run(model)
    step = attempt.steps[0]
    assert step.kind == "act" and step.tool_calls[0].name == "add"
    assert step.results[0].output == "5"
    assert orphan_problems(model.calls[1].messages) == []


def test_bare_json_tool_call_is_recovered() -> None:
    with ScriptedModel(['{"name": "add", "arguments": {"a": 4, "b": 4}}', "8"]) as model:
        attempt = run(model)
    assert attempt.steps[0].results[0].output == "8"
    assert attempt.answer == "8"


def call_count_twice(settings: ActorSettings) -> tuple[list[int], Attempt]:
    """The model calls count(1) twice; returns what really ran, and the attempt."""
    executed: list[int] = []

    @tool
    def count(n: int) -> str:
        """Use to count."""
        executed.append(n)
        return str(n)

    script = [reply("", tool_call("count", n=1)), reply("", tool_call("count", n=1)), "1"]
    with ScriptedModel(script) as model:
        attempt = Actor(model, settings).run("t", "count", [count])
    return executed, attempt


def test_repeated_call_gets_a_nudge_not_a_second_execution() -> None:
    executed, attempt = call_count_twice(ActorSettings())
    assert executed == [1]
    nudge = attempt.steps[1].results[0]
    assert nudge.status == "repeated" and "already called count" in nudge.output


def test_a_call_repeated_after_a_write_runs_again() -> None:
    """Seen on `solve`: the model fixed a file and ran the tests again, and was told it had
    already run them; after a write, what was seen before may be stale."""
    executed: list[str] = []

    @tool
    def run_tests() -> str:
        """Use to run the tests."""
        executed.append("tests")
        return "1 failed" if len(executed) == 1 else "all passed"

    @tool(changes_state=True)
    def write_file(path: str, content: str) -> str:
        """Use to write a file."""
        executed.append("write")
        return "wrote"

    script = [reply("", tool_call("run_tests")), reply("", tool_call("write_file", path="a", content="b")),
              reply("", tool_call("run_tests")), reply("", tool_call("run_tests")), "done"]  # fmt: skip
    with ScriptedModel(script) as model:
        attempt = Actor(model, ActorSettings()).run("t", "fix it", [run_tests, write_file])
    assert executed == ["tests", "write", "tests"]  # the last call repeats with nothing between
    assert attempt.steps[2].results[0].output == "all passed"
    assert attempt.steps[3].results[0].status == "repeated"


def test_repeat_nudge_can_be_turned_off() -> None:
    executed, _ = call_count_twice(ActorSettings(nudge_repeats=False))
    assert executed == [1, 1]


def test_approval_denied_without_callback_and_by_callback() -> None:
    ran: list[str] = []

    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Use to delete a file."""
        ran.append(path)
        return "deleted"

    with ScriptedModel([reply("", tool_call("delete", path="x")), "no"]) as model:
        attempt = Actor(model).run("t", "delete x", [delete])
    assert attempt.steps[0].results[0].status == "denied"

    asked: list[ToolCall] = []

    def approver(call: ToolCall) -> bool:
        asked.append(call)
        return call.arguments == '{"path": "ok"}'

    script = [
        reply("", tool_call("delete", path="x")),
        reply("", tool_call("delete", path="ok")),
        "done",
    ]
    with ScriptedModel(script) as model:
        attempt = Actor(model, approve=approver).run("t", "delete", [delete])
    assert [r.status for s in attempt.steps for r in s.results] == ["denied", "ok"]
    assert ran == ["ok"] and len(asked) == 2


def test_tool_timeout_is_an_observation() -> None:
    @tool(timeout=0.2)
    def hang() -> str:
        """Use to hang."""
        time.sleep(2)
        return "never"

    with ScriptedModel([reply("", tool_call("hang")), "gave up"]) as model:
        attempt = Actor(model).run("t", "hang", [hang])
    assert attempt.steps[0].results[0].status == "timeout"


def test_long_and_empty_outputs_are_marked() -> None:
    @tool
    def big() -> str:
        """Use for a lot of text."""
        return "x" * 10_000

    @tool
    def empty() -> str:
        """Use for nothing."""
        return ""

    script = [reply("", tool_call("big"), tool_call("empty")), "ok"]
    with ScriptedModel(script) as model:
        attempt = Actor(model).run("t", "big", [big, empty])
    big_out, empty_out = (r.output for r in attempt.steps[0].results)
    assert "characters cut" in big_out and len(big_out) < 5000
    assert empty_out == "(no output)"


def test_text_protocol_end_to_end_uses_stop_sequences_and_observations() -> None:
    script = [
        'Thought: add them\nAction: add\nAction Input: {"a": 2, "b": 3}',
        "Thought: I know\nFinal Answer: 5",
    ]
    with ScriptedModel(script) as model:
        attempt = run(model, protocol="text")
    assert attempt.answer == "5"
    assert model.calls[0].stop and "\nObservation:" in model.calls[0].stop
    assert model.calls[0].tools is None
    assert "add" in model.calls[0].messages[0]["content"]
    assert model.calls[1].messages[-1]["content"] == "Observation: 5"


def test_what_a_text_reply_imagines_after_its_action_is_not_shown_back_as_done() -> None:
    """Seen on the 1.5B model (solve_real, isodate): no stop fired, and after its action it
    wrote the output it imagined (`Action Output:`), then more actions and their outputs. Only
    the first action runs; the model is shown that action and its real observation, not its
    own story of what came next."""
    imagined = (
        'Thought: add them\nAction: add\nAction Input: {"a": 2, "b": 3}\n'
        "    Action Output: 7\n"
        'Thought: now again\nAction: add\nAction Input: {"a": 7, "b": 1}\n'
        "Action Output: 8\nThought: done"
    )
    with ScriptedModel([imagined, "Final Answer: 5"]) as model:
        attempt = run(model, protocol="text")
    first = attempt.steps[0]
    assert [c.arguments for c in first.tool_calls] == ['{"a": 2, "b": 3}']
    shown = model.calls[1].messages
    said = next(m["content"] for m in reversed(shown) if m["role"] == "assistant")
    assert said.endswith('Action Input: {"a": 2, "b": 3}')
    assert "7" not in said and "now again" not in said
    assert shown[-1]["content"] == "Observation: 5"
    # nothing the model wrote is lost: the log keeps the rest, marked as not run
    assert first.text + first.discarded == imagined
    assert "characters after the action, not run" in trajectory(attempt)


def test_a_model_that_only_repeats_itself_is_asked_for_its_answer() -> None:
    """Seen on the 1.5B model in solve_real: the same call eight to ten times in a row, each
    told it was a repeat, until the steps ran out (12 steps, ~100 s). After `max_repeats`
    steps of nothing but repeats, the next call is the last, without tools."""
    again = [reply("", tool_call("add", a=2, b=3)) for _ in range(4)]  # a 5th is never asked
    with ScriptedModel([*again, "5"]) as model:
        attempt = run(model, budget=BudgetSection(max_steps=12, max_repeats=3))
    statuses = [r.status for s in attempt.steps for r in s.results]
    assert statuses == ["ok", "repeated", "repeated", "repeated"]
    assert attempt.answer == "5" and attempt.final_forced and len(attempt.steps) == 5
    assert model.calls[-1].tools is None  # the last call offered no tools
    # a fresh call in between starts the count again
    mixed = [reply("", tool_call("add", a=2, b=b)) for b in (0, 0, 0, 1, 1, 1, 2)]
    with ScriptedModel([*mixed, "5"]) as model:
        attempt = run(model, budget=BudgetSection(max_steps=12, max_repeats=3))
    assert len(attempt.steps) == 8 and not attempt.final_forced
