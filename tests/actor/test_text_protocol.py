"""The text protocol's parser: messy replies parse, unreadable ones fail with a reason, several
calls in one message are read, plain text is no call, and a reply that runs on past its
action is cut there."""

from __future__ import annotations

import json

import pytest

from mulligan.actor import Actor, ActorSettings, tool
from mulligan.actor.text_protocol import (
    STOP_SEQUENCES,
    Action,
    FinalAnswer,
    ParseFailure,
    acted_on,
    parse_text_turn,
)
from mulligan.actor.text_tool_calls import recover_text_tool_calls
from mulligan.jsontext import WINDOW
from mulligan.testing import ScriptedModel

TOOLS = ["calculator", "search", "lookup", "python"]

# Messy outputs of the kind real models produce, each with what it must parse to.
CASES = [
    (
        'Thought: I need to add.\nAction: calculator\nAction Input: {"expression": "2+2"}',
        Action("calculator", '{"expression": "2+2"}'),
    ),
    ("Thought 1: look it up\nAction 1: search[Paris]", Action("search", '"Paris"')),
    (
        '**Thought:** hmm\n**Action:** calculator\n**Action Input:** {"expression": "3*3"}',
        Action("calculator", '{"expression": "3*3"}'),
    ),
    (
        'Action: calculator\nAction Input:\n```json\n{\n  "expression": "1+1"\n}\n```',
        Action("calculator", '{"expression": "1+1"}'),
    ),
    ("Action: Calculator\nAction Input: 7*6", Action("calculator", '"7*6"')),
    ('action: `search`\naction input: "Eiffel Tower"', Action("search", '"Eiffel Tower"')),
    ("Thought: done\nFinal Answer: 42", FinalAnswer("42")),
    ("**Final Answer**: Paris", FinalAnswer("Paris")),
    ("I am confident.\nfinal answer: the Seine", FinalAnswer("the Seine")),
    ("Thought: finished\nAction: Finish[yes]", FinalAnswer("yes")),
    (
        'Sure! {"action": "calculator", "action_input": {"expression": "5-1"}}',
        Action("calculator", '{"expression": "5-1"}'),
    ),
    (
        'Action: lookup\nAction Input: {"keyword": "born"}\nObservation: born in 1900\n'
        "Final Answer: 1900",
        Action("lookup", '{"keyword": "born"}'),
    ),
    (
        "Final Answer:\n```python\ndef f(x):\n    return x\n```",
        FinalAnswer("```python\ndef f(x):\n    return x\n```"),
    ),
    (
        'Action: {"name": "python", "arguments": {"code": "print(1)"}}',
        Action("python", '{"code": "print(1)"}'),
    ),
    ('{"action": "Final Answer", "action_input": "blue"}', FinalAnswer("blue")),
    (
        'Thought: I should search\nAction: search\nAction Input: {"entity": "Ada"}\n\n',
        Action("search", '{"entity": "Ada"}'),
    ),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_messy_outputs_parse(text: str, expected: object) -> None:
    parsed = parse_text_turn(text, TOOLS)
    if isinstance(expected, Action):
        assert isinstance(parsed, Action), parsed
        assert parsed.name == expected.name
        assert json.loads(parsed.arguments) == json.loads(expected.arguments)
    else:
        assert parsed == expected


@pytest.mark.parametrize(
    "text",
    ["I think the answer might be Paris.", "", "Thought: hmm", "Final Answer:   "]
    + ["Action: Finish[ ]", '{"action": "Final Answer", "action_input": ""}'],  # empty answers
)
def test_unreadable_outputs_fail_with_a_reason(text: str) -> None:
    parsed = parse_text_turn(text, TOOLS)
    assert isinstance(parsed, ParseFailure) and parsed.reason


def test_hermes_tool_calls_several_in_one_message() -> None:
    text = (
        'Let me check.\n<tool_call>\n{"name": "search", "arguments": {"entity": "A"}}\n'
        '</tool_call>\n<tool_call>{"name": "search", "arguments": {"entity": "B"}}</tool_call>'
    )
    calls, rest = recover_text_tool_calls(text, 3)
    assert [c.name for c in calls] == ["search", "search"]
    assert [json.loads(c.arguments) for c in calls] == [{"entity": "A"}, {"entity": "B"}]
    assert len({c.id for c in calls}) == 2
    assert rest == "Let me check."


def test_several_bare_json_calls_in_one_fence_are_recovered() -> None:
    # as Qwen2.5-Coder-1.5B wrote them through llama.cpp's server with native tools
    text = (
        '```python\n{\n    "name": "search",\n    "arguments": {"entity": "Google"}\n}\n'
        '{\n    "name": "lookup",\n    "arguments": {"keyword": "Award"}\n}\n```'
    )
    calls, rest = recover_text_tool_calls(text, 2)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("search", {"entity": "Google"}),
        ("lookup", {"keyword": "Award"}),
    ]
    assert [c.id for c in calls] == ["call_2_0", "call_2_1"] and rest == ""
    # anything else around the objects, or an object that is no call: left as text
    for kept in (
        '{"name": "search", "arguments": {}} and then I will answer',
        '{"name": "search", "arguments": {}}\n{"answer": 3}',
        '{"name": "search", "arguments": {}}\n[1, 2]',
    ):
        assert recover_text_tool_calls(kept, 0) == ([], kept)


def test_plain_text_is_not_a_tool_call() -> None:
    assert recover_text_tool_calls("The answer is {x}.", 0) == ([], "The answer is {x}.")
    assert recover_text_tool_calls('{"answer": 3}', 0)[0] == []


# ------------------------------------------------ a reply that runs on past its first action

# What Qwen2.5-Coder-1.5B wrote on `solve` (text protocol): no `Observation:` line, so no
# stop fired and it imagined a whole session, 1,023 tokens (~100 s on a CPU) for one step.
RUNAWAY = (
    "Thought: I don't have access to the original project code.\n\n"
    'Action: list_files\nAction Input: {"path": "inflection"}\n\n'
    "Thought: The `inflection` directory contains the source code. Let's look.\n\n"
    'Action: python\nAction Input: {"code": "from inflection import dasherize"}\n\n'
    "Thought: The output of the above Python script indicates that"
)


def as_a_server_sends_it(text: str, stops: list[str]) -> str:
    """What an OpenAI-compatible server returns: the text up to the first stop, without it."""
    cut = min((i for s in stops if (i := text.find(s)) >= 0), default=len(text))
    return text[:cut]


def test_a_reply_that_goes_on_after_its_action_is_stopped_there_and_its_action_runs() -> None:
    sent = as_a_server_sends_it(RUNAWAY, STOP_SEQUENCES)
    assert "python" not in sent.split("list_files", 1)[1]  # nothing after the first action
    assert parse_text_turn(sent, ["list_files", "python"]) == Action(
        "list_files", '{"path": "inflection"}'
    )
    nested = 'Action: python\nAction Input: {"code": "x", "env": {"A": "1"}}\nThought: next'
    assert parse_text_turn(as_a_server_sends_it(nested, STOP_SEQUENCES), TOOLS) == Action(
        "python", '{"code": "x", "env": {"A": "1"}}'
    )


@pytest.mark.parametrize(
    "reply",
    [
        'Thought: look\nAction: python\nAction Input: {"code": "print(1)"}',
        '\nThought: look\nAction: python\nAction Input: {"code": "print(1)"}',
        '\n\nThought: look\nAction: python\nAction Input: {"code": "print(1)"}',
        "Thought: done\nFinal Answer: {'a': 1}",
        'Action: python\nAction Input: {"code": "d = {}\\nprint(d)"}',
    ],
)
def test_the_stops_leave_a_reply_of_one_action_whole(reply: str) -> None:
    assert as_a_server_sends_it(reply, STOP_SEQUENCES) == reply
    assert as_a_server_sends_it(reply, STOP_SEQUENCES[:4]) == reply  # what a hosted API gets


def test_an_input_missing_only_its_last_brace_is_read_whole_and_nothing_else_is_guessed() -> None:
    assert parse_text_turn('Action: python\nAction Input: {"code": "1"', TOOLS) == Action(
        "python", '{"code": "1"}'
    )
    # an input cut inside a string is not repaired into something the model did not write,
    # nor made the code to run: it stays as written, for the registry's error to quote
    cut = parse_text_turn('Action: python\nAction Input: {"code": "pri', TOOLS)
    assert cut == Action("python", '{"code": "pri')


def test_an_actions_input_is_never_taken_from_the_action_after_it() -> None:
    """Seen on the 1.5B model: a write_file input in Python triple quotes, then a second
    action; the shell command's input was handed to write_file."""
    two = (
        'Action: write_file\nAction Input: {"path": "a.py", "content": """\nx = 1\n"""}\n'
        'Action: shell\nAction Input: {"command": "pytest -q"}'
    )
    parsed = parse_text_turn(two, ["write_file", "shell"])
    assert isinstance(parsed, Action) and parsed.name == "write_file"
    assert "pytest" not in parsed.arguments


def test_python_triple_quoted_strings_in_an_input_are_read_as_the_strings_they_are() -> None:
    text = 'Action: write_file\nAction Input: {"path": "a.py", "content": """def f():\n    return "x"\n"""}'
    assert parse_text_turn(text, ["write_file"]) == Action(
        "write_file", json.dumps({"path": "a.py", "content": 'def f():\n    return "x"\n'})
    )


@pytest.mark.parametrize(
    "after",
    [
        "\n    Action Output: ```python\nx = 1\n```\n",
        "\nObservation: 7\n",
        "\n\nThought: next\nAction: python\n",
        "\nTool Output: (empty directory)\n",
    ],
)
def test_the_acted_on_part_of_a_reply_ends_with_its_first_actions_input(after: str) -> None:
    reply = 'Thought: look\nAction: python\nAction Input: {"code": "print(1)"}'
    acted, rest = acted_on(reply + after)
    assert acted == reply and acted + rest == reply + after
    assert parse_text_turn(reply + after, TOOLS) == Action("python", '{"code": "print(1)"}')


def test_a_reply_without_an_action_is_acted_on_whole() -> None:
    for text in ("Thought: done\nFinal Answer: 5\n", "just prose"):
        assert acted_on(text) == (text, "")


def test_an_input_with_raw_newlines_and_escaped_quotes_is_read_as_the_model_meant_it() -> None:
    """Seen on the 1.5B model in solve_real (inflection, retry): code in a JSON string with a
    real line break and `\\'` (neither is JSON); the whole input went to `python` as a string,
    and the model was shown a SyntaxError in code it never wrote, eight times."""
    text = (
        'Action: python\nAction Input: {"code": "with open(\'a.py\') as f:\\n    x = f.read()'
        " + '\\'-suffix\\''\n    print(x)\"}\nResult:\n```\n[exit status 0]\n```"
    )
    parsed = parse_text_turn(text, TOOLS)
    assert isinstance(parsed, Action) and parsed.name == "python"
    code = json.loads(parsed.arguments)["code"]
    assert code == "with open('a.py') as f:\n    x = f.read() + '\\'-suffix\\''\n    print(x)"
    acted, rest = acted_on(text)
    assert acted.endswith('print(x)"}') and rest.lstrip().startswith("Result:")


def test_the_first_four_stops_are_the_ones_every_endpoint_takes() -> None:
    """A hosted endpoint gets only the first four (the adapter cuts there): those are the
    stops that end a turn at its imagined observation or next thought."""
    assert STOP_SEQUENCES[:4] == [
        "\nObservation:",
        "\nObservation 1:",
        "}\nThought:",
        "}\n\nThought:",
    ]
    imagined = 'Action: python\nAction Input: {"code": "1"}\n    Action Output: 1\nThought: more'
    sent = as_a_server_sends_it(imagined, STOP_SEQUENCES)
    assert sent == 'Action: python\nAction Input: {"code": "1"}\n    '
    assert parse_text_turn(sent, TOOLS) == Action("python", '{"code": "1"}')


@pytest.mark.parametrize("written", ['read_file, {"path": "a.py"}', 'read_file {"path": "a.py"}',
                                     'read_file({"path": "a.py"})'])  # fmt: skip
def test_an_action_line_with_its_input_after_the_name_is_that_tool_and_that_input(
    written: str,
) -> None:
    """Seen on the 1.5B model (solve_real, f372112): `Action: read_file, {"path": ...}` was
    taken for a tool named `read_file, {"path": ...}`, and the attempt ended on it."""
    for text in (f"Action: {written}", f'Action: {written}\nAction Input: {{"path": "a.py"}}'):
        assert parse_text_turn(text, ["read_file"]) == Action("read_file", '{"path": "a.py"}')


def test_what_is_acted_on_ends_where_the_inputs_json_ends() -> None:
    """The model's imagined output often follows its input with no label: a fenced block, or
    `Output:`. With a JSON input, nothing after the object is part of the action."""
    reply = 'Thought: look\nAction: read_file\nAction Input: {"path": "a.py"}'
    for after in (
        "\n```python\n# the content of a.py\n```\n",
        "\n\nOutput:\nx = 1\n",
        "\nReview: ok",
    ):
        assert acted_on(reply + after) == (reply, after)


@pytest.mark.parametrize(
    "written",
    ['{"code": "print(1)",}', '{"code": "print(1)", "timeout": ', "{'code': 'print(1)'}"],
)
def test_an_input_object_that_is_not_json_is_an_error_not_the_tools_one_argument(
    written: str,
) -> None:
    """A one-parameter tool given a broken object was run on its text: python ran
    `{"code": "print(1)",}` and answered "(no output)"."""
    ran: list[str] = []

    @tool
    def python(code: str) -> str:
        """Use to run Python code."""
        ran.append(code)
        return "(ran)"

    reply = f"Action: python\nAction Input: {written}"
    with ScriptedModel([reply, "Final Answer: done"]) as model:
        attempt = Actor(model, ActorSettings(protocol="text")).run("t", "Run it.", [python])
    result = attempt.steps[0].results[0]
    assert ran == [] and result.status == "error"
    assert "not valid JSON" in result.output and written.strip() in result.output


@pytest.mark.parametrize("flood", ['{"a":', '[{"a":', '{"a": [[[[[[[[[['])
def test_json_nested_past_what_python_reads_is_tried_once_a_window_not_at_every_brace(
    flood: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each try at a brace of an unclosed flood of objects read down to Python's recursion
    limit before it failed: a megabyte reply took a try at each of its 200,000 braces."""
    tries = counted_decodes(monkeypatch)
    text = "Thought: x\n" + flood * (20 * WINDOW // len(flood))
    assert isinstance(parse_text_turn(text, TOOLS), ParseFailure)  # fed back as a format error
    assert len(tries) <= 2 * len(text) // WINDOW, len(tries)


def counted_decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Where each JSON read starts, from now on."""
    tries: list[int] = []
    decode = json.JSONDecoder.raw_decode

    def counted(self: json.JSONDecoder, text: str, at: int = 0) -> tuple[object, int]:
        tries.append(at)
        return decode(self, text, at)

    monkeypatch.setattr(json.JSONDecoder, "raw_decode", counted)
    return tries


@pytest.mark.parametrize("flood", ['{"', '[{"', '{ "', '{"a"\n', '{"a" {"'])
def test_a_brace_no_key_and_colon_follow_is_never_read_as_an_object(
    flood: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A brace opens an object only before a closing brace or a key and its colon: a
    megabyte of `{"` was read at each of its 500,000 braces (a second and more)."""
    tries = counted_decodes(monkeypatch)
    text = "Thought: x\n" + flood * (20 * WINDOW // len(flood))
    assert isinstance(parse_text_turn(text, TOOLS), ParseFailure)  # fed back as a format error
    assert len(tries) <= 2, len(tries)


@pytest.mark.parametrize(
    "written",
    ['{"action": "search", "action_input": {"q": "x"}}',
     '{ "action" : "search", "action_input": {"q": "x"}}',
     '{"act\\"ion": 1, "action": "search", "action_input": {"q": "x"}}',
     '{\n  "action":\n "search", "action_input": {"q": "x"}}'],
)  # fmt: skip
def test_an_object_after_a_flood_of_braces_is_still_found(written: str) -> None:
    text = "Thought: x\n" + '{"' * 3000 + "{ " * 100 + written + " {}"
    assert parse_text_turn(text, TOOLS) == Action("search", '{"q": "x"}')
