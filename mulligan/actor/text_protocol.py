"""Parsing the text ReAct protocol.

Lenient by design: line prefixes first (`Action:`, `Action Input:`, `Final Answer:`,
with markdown emphasis, numbering and any case), then ReAct's `tool[argument]`,
then a JSON object anywhere in the message. Tool calls a server left as text are recovered
in `text_tool_calls`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from mulligan.jsontext import UNREADABLE_JSON, ObjectEnds, first_json_object

STOP_SEQUENCES = [
    "\nObservation:", "\nObservation 1:", "}\nThought:", "}\n\nThought:",
    "Action Output:", "\nResult:", "Tool Output:",
]  # fmt: skip
"""Where a server ends a text-protocol turn: at an imagined observation, or at the next thought
after an action's JSON input, for a model that writes no `Observation:` and would imagine a
whole session in one reply. The server drops the stop it matched, and with it that input's
last brace: `_missing_last_brace` puts it back. OpenAI's API takes four stops at most: a hosted
endpoint gets the first four (`stops_for`); the rest, for the outputs the 1.5B model imagines
under other names, go to self-hosted servers, which take more."""


@dataclass
class Action:
    name: str
    arguments: str
    """JSON text: an object, or a JSON string for a single bare argument."""


@dataclass
class FinalAnswer:
    text: str


@dataclass
class ParseFailure:
    reason: str


Parsed = Action | FinalAnswer | ParseFailure

_EMPHASIS = r"[*_`#>\s]*"
_LABEL = r"(?:\s*\d+)?" + _EMPHASIS + r"\s*:[*_ \t]*"
_FINAL = re.compile(r"^" + _EMPHASIS + r"final[ _]answer" + _LABEL, re.I | re.M)
_ACTION = re.compile(r"^" + _EMPHASIS + r"action" + _LABEL + r"(?P<value>.*)$", re.I | re.M)
_INPUT = re.compile(r"^" + _EMPHASIS + r"action[ _]input" + _LABEL, re.I | re.M)
_BRACKET = re.compile(r"^\s*`?(?P<name>[\w.-]+)\s*\[(?P<arg>.*)\]`?\s*$", re.S)
_OBSERVATION = re.compile(
    r"^"
    + _EMPHASIS
    + r"(?:observation|result|(?:action|tool)[ _](?:output|result))(?:\s*\d+)?\s*:",
    re.I | re.M,
)
"""A result the model imagined: `Observation:`, or `Action Output:` or `Result:` as the 1.5B
model writes them."""
_NEXT_LABEL = re.compile(
    r"^" + _EMPHASIS + r"(?:thought|action|final[ _]answer|observation)" + _LABEL, re.I | re.M
)
_NAME_THEN_INPUT = re.compile(
    r"^`?(?P<name>[\w.-]+)`?\s*[,:]?\s*\(?\s*(?P<input>\{.*\})\s*\)?\s*$", re.S
)
_TRIPLE_QUOTED = re.compile(r'"""(.*?)"""', re.S)
_QUOTE_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\'")
"""`\\'`, which JSON has not: a model writing Python in a JSON string means the backslash too."""
_LENIENT = json.JSONDecoder(strict=False)
"""JSON that also takes a raw line break inside a string, as models write code."""
_FENCE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?```\s*$", re.S)
_WORDED = re.compile(r"[^*_`#>\s\d:]")
"""A character no label has outside its word: a line with one can start a label, and a
label begun on a line before it has ended."""


def parse_text_turn(text: str, tool_names: list[str]) -> Parsed:
    """Read one model turn written in the text protocol; an empty answer is none, however
    it was given (`Final Answer:`, `finish[]`, a JSON final answer)."""
    parsed = _parse_turn(_cut_hallucinated_observation(text), tool_names)
    empty = isinstance(parsed, FinalAnswer) and not parsed.text.strip()
    return ParseFailure("the final answer was empty") if empty else parsed


def _parse_turn(text: str, tool_names: list[str]) -> Parsed:
    final = _FINAL.search(text)
    action = _ACTION.search(text)
    if final and (not action or final.start() < action.start()):
        rest = text[final.end() :]
        after = _NEXT_LABEL.search(rest)  # an action or thought it went on to write
        return FinalAnswer((rest[: after.start()] if after else rest).strip())
    if action:
        return _parse_action(text, action, tool_names)
    obj = first_json_object(text)
    if obj is not None:
        found = _action_from_json(obj, tool_names)
        if found:
            return found
    return ParseFailure("no `Action:` or `Final Answer:` line found")


def strip_final_label(text: str) -> str:
    """The answer after a `Final Answer:` label, or the whole text when there is none."""
    match = _FINAL.search(text)
    return (text[match.end() :] if match else text).strip()


def acted_on(text: str) -> tuple[str, str]:
    """A text-protocol reply split where its first action's input ends: the part the actor
    runs, and what the model went on to write (outputs it imagined, more actions), which was
    never run. `acted + rest == text`."""
    found = _action_end(text)
    cut = found[0] if found else len(text)
    return text[:cut], text[cut:]


def action_ended(text: str) -> bool:
    """The reply so far holds a whole first action, its input complete (a JSON object
    closed, or another label begun after it), and no final answer before it: the rest of
    the turn would never be run, so a streamed reply can stop being read here."""
    final = _FINAL.search(text)
    found = _action_end(text)
    return found is not None and found[1] and not (final and final.start() < found[2])


class ActionWatch:
    """`action_ended` told a streamed reply piece by piece (a `Watch`), in time linear in the
    reply: asking `action_ended` of the whole text at every piece took N^2 / 2 characters.

    A label starts a line and ends at its first colon, so each run of lines, from one with a
    word before any colon up to the next such line, is read once, at its first colon. Before
    the first action's label no action has ended (and none will after a final answer or an
    imagined observation); from it, `action_ended` reads the text from that label's line, and
    only at a piece that can end the action's input: a label's colon, or the closing brace
    of its JSON object (`ObjectEnds`).
    Once it holds it holds: the stream is closed there."""

    def __init__(self) -> None:
        self._acted: list[str] | None = None
        """The text from the first action's line on."""
        self._run: list[str] = []
        """The run of lines before the line being written, from its line with a word."""
        self._line: list[str] = []
        self._object: ObjectEnds | None = None
        """Where the action's JSON input can close, once it has one."""
        self._inline = self._lead = self._given = False
        """`_inline`: the action's line is still being written, and no object is in it yet."""
        self._settled = self._colon_read = self._never = self._ended = False
        """`_settled`: the line being written has started a run, or can no longer (its colon
        came before any word)."""

    def __call__(self, piece: str) -> bool:
        if self._never or self._ended:
            return self._ended
        labelled = False
        for index, segment in enumerate(piece.split("\n")):
            if index:
                self._run += [*self._line, "\n"]
                self._line, self._settled = [], False
            if not self._settled and _WORDED.search(segment.partition(":")[0]):
                self._run, self._colon_read = [], False  # a run starts on this line
            self._settled = self._settled or bool(_WORDED.search(segment)) or ":" in segment
            self._line.append(segment)
            if self._acted is not None:
                self._acted.append("\n" + segment if index else segment)
            if ":" in segment and not self._colon_read:
                self._colon_read = True
                labelled = self._label_read("".join(self._run + self._line)) or labelled
            if self._never:
                return False
        if self._acted is None:
            return False
        if labelled or (self._object is None and self._inline and "{" in piece):
            self._read_again()
        elif self._object is not None:
            if self._lead:  # the input's object starts after the emphasis its label took
                piece = piece.lstrip("*_ \t")
                self._lead = not piece
            if self._object(piece):
                self._ended, self._object = action_ended("".join(self._acted)), None
        return self._ended

    def _read_again(self) -> None:
        """Ask `action_ended` of the text from the action's line, and find its input's object
        again (a label may have moved it)."""
        text = "".join(self._acted or [])
        self._ended = action_ended(text)
        action = _ACTION.search(_cut_hallucinated_observation(text))
        start, at = _input_start(text, action) if action else (-1, -1)
        self._inline = at < 0 and action is not None and action.end() == len(text)
        self._lead = at == start == len(text)  # the label may yet take emphasis after it
        self._object = ObjectEnds() if at >= 0 else None
        if self._object is not None and self._object(text[at:]):
            self._object = None  # it closed without ending the action: it never will

    def _label_read(self, run: str) -> bool:
        """Note the label the run of lines starts with; True where it can end an action."""
        if self._acted is not None:
            if not self._given and _INPUT.match(run):  # the first is the action's input
                self._given = True
                return True
            return bool(_NEXT_LABEL.match(run) or _OBSERVATION.match(run))
        if _FINAL.match(run) or _OBSERVATION.match(run):
            self._never = True
        elif _ACTION.match(run):
            self._acted = [run]
            return True
        return False


def _action_end(text: str) -> tuple[int, bool, int] | None:
    """Where the first action's input ends, whether it is known to be complete (else it runs
    to the end of the text so far), and where the action starts; None without an action."""
    action = _ACTION.search(_cut_hallucinated_observation(text))
    if action is None:
        return None
    start, at = _input_start(text, action)
    found = _object_at(text, at) if at >= 0 else None
    if found:  # a JSON input: it ends with its object
        cut, complete = found[1], True
    else:  # not a JSON input: it ends at the next label
        ends = [
            m.start()
            for m in (_NEXT_LABEL.search(text, start), _OBSERVATION.search(text, start))
            if m
        ]
        cut, complete = min(ends, default=len(text)), bool(ends)
    while cut > start and text[cut - 1].isspace():
        cut -= 1
    return cut, complete, action.start()


def _input_start(text: str, action: re.Match[str]) -> tuple[int, int]:
    """Where the action's input starts, and where its JSON object does (-1: it has none)."""
    given = _input_of(text, action)
    start = given.end() if given else action.end()
    return start, start if given else text.find("{", action.start("value"), action.end())


def _object_at(text: str, at: int = 0) -> tuple[dict[str, object], int] | None:
    """The JSON object starting at `at` (after blanks), and where it ends; None if none does."""
    at += len(text[at:]) - len(text[at:].lstrip())
    try:
        value, end = _LENIENT.raw_decode(text, at)
    except UNREADABLE_JSON:
        return None
    return (value, end) if isinstance(value, dict) else None


def _cut_hallucinated_observation(text: str) -> str:
    match = _OBSERVATION.search(text)
    return text[: match.start()] if match else text


def _parse_action(text: str, action: re.Match[str], tool_names: list[str]) -> Parsed:
    value = action.group("value").strip().strip("*_").strip()
    bracket = _BRACKET.match(value)
    if bracket:
        name = _known_name(bracket.group("name"), tool_names)
        argument = bracket.group("arg").strip()
        if name.lower() == "finish":
            return FinalAnswer(argument)
        return Action(name, _as_arguments(argument))
    inline = _NAME_THEN_INPUT.match(value)
    if inline:  # `Action: read_file, {"path": ...}`
        return Action(_known_name(inline.group("name"), tool_names), _as_arguments(inline["input"]))
    if value.startswith("{"):
        rest = text[action.start("value") :].strip()
        obj = _missing_last_brace(rest) or first_json_object(rest)
        found = _action_from_json(obj, tool_names) if obj is not None else None
        if found:
            return found
    name = _known_name(value.strip("`'\" "), tool_names)
    if not name:
        return ParseFailure("`Action:` names no tool")
    given = _input_of(text, action)
    if given is None:
        return Action(name, "{}")
    rest = text[given.end() :]
    following = _NEXT_LABEL.search(rest)  # the input ends where the next thought or action starts
    raw = unfence((rest[: following.start()] if following else rest).strip())
    return Action(name, _as_arguments(raw))


def _input_of(text: str, action: re.Match[str]) -> re.Match[str] | None:
    """The `Action Input:` of this action: one before the next label, not a later action's."""
    given = _INPUT.search(text, action.end())
    following = _NEXT_LABEL.search(text, action.end())
    return given if given and (following is None or given.start() <= following.start()) else None


def _known_name(name: str, tool_names: list[str]) -> str:
    """Match a tool name case-insensitively; unknown names pass through (the registry says so)."""
    name = name.strip()
    return next((known for known in tool_names if known.lower() == name.lower()), name)


def unfence(text: str) -> str:
    """The text inside a markdown code fence around all of it, else the text."""
    match = _FENCE.match(text.strip())
    return match.group(1).strip() if match else text.strip()


def _as_arguments(raw: str) -> str:
    """JSON text for the registry: the raw input if it is JSON, else a JSON string of it;
    an object that cannot be read stays as written (the registry's error quotes it, where a
    one-parameter tool would have been run on its text). Lenient where small models are:
    Python triple-quoted strings, a final brace a stop took."""
    raw = raw.strip()
    if raw.startswith("{"):
        as_json = _TRIPLE_QUOTED.sub(lambda quoted: json.dumps(quoted.group(1)), raw)
        for form in (raw, as_json, _QUOTE_ESCAPE.sub(r"\1\\\\'", as_json)):
            found = _object_at(form)
            obj = found[0] if found else _missing_last_brace(form)
            if obj is not None:
                return json.dumps(obj)
        obj = first_json_object(raw)
        return raw if obj is None else json.dumps(obj)
    try:
        json.loads(raw)
        return raw
    except UNREADABLE_JSON:
        return json.dumps(raw.strip().strip('"').strip("'"))


def _missing_last_brace(raw: str) -> dict[str, object] | None:
    """The object `raw` is when only its final brace is missing (the stop took it), else None:
    nothing else is completed."""
    found = _object_at(raw + "}")
    return found[0] if found and found[1] == len(raw) + 1 else None


def _action_from_json(obj: dict[str, object], tool_names: list[str]) -> Parsed | None:
    name = obj.get("action") or obj.get("name") or obj.get("tool")
    if not isinstance(name, str):
        return None
    arguments = obj.get("action_input", obj.get("arguments", obj.get("input", {})))
    if name.lower().replace(" ", "_") in ("final_answer", "finish"):
        return FinalAnswer(str(arguments))
    return Action(_known_name(name, tool_names), json.dumps(arguments))
