"""The view sent to the model, and folding old steps into a running summary.

view = system + task (pinned) + lessons (pinned, quoted as data) + running summary
       + the most recent steps verbatim.

Steps are rendered into messages a whole step at a time (a model turn with all its tool
results), so a call is never separated from its result; a step is rendered once, when it
first enters the view (a step is not changed after it joins the attempt), and every call
gets its own copy of each message. The attempt keeps every step; only the view shrinks.

Everything in the view is neutralised (mulligan.untrusted): tool output, files, the task,
lessons, the carried attempt and the model's own echo cannot pose as a chat turn. The
steps themselves keep the raw text, and a call's arguments that are not JSON go back as
`{}` (the model's text stays in the step; its error observation quotes it).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Literal

from mulligan import prompts
from mulligan.actor.tools import strict_json
from mulligan.errors import ModelError
from mulligan.jsontext import UNREADABLE_JSON
from mulligan.llm.base import ChatModel, Message
from mulligan.llm.tokens import TokenEstimator
from mulligan.schema import CompressionEvent, Step, Usage
from mulligan.settings.run_config import CompressionSection
from mulligan.untrusted import neutralise, neutralise_all

log = logging.getLogger("mulligan")


Protocol = Literal["native", "text"]


def render_step(step: Step, protocol: Protocol) -> list[Message]:
    """A step as chat messages: the model's turn, then every result or reminder it got."""
    text = neutralise(step.text)
    feedback = [{"role": "user", "content": neutralise(step.feedback)}] if step.feedback else []
    if protocol == "text" or not step.tool_calls:
        messages: list[Message] = [{"role": "assistant", "content": text}]
        if step.results:
            observations = neutralise("\n".join(r.output for r in step.results))
            messages.append({"role": "user", "content": f"Observation: {observations}"})
        return messages + feedback
    messages = [
        {
            "role": "assistant",
            "content": text,  # "" not None: some servers reject null content
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": neutralise(call.name),
                        "arguments": sendable_arguments(call.arguments),
                    },
                }
                for call in step.tool_calls
            ],
        }
    ]
    by_id = {r.call_id: r for r in step.results}
    for call in step.tool_calls:
        result = by_id.get(call.id)
        output = result.output if result else "Error: interrupted before this call returned."
        messages.append({"role": "tool", "tool_call_id": call.id, "content": neutralise(output)})
    return messages + feedback


def sendable_arguments(written: str) -> str:
    """A call's arguments as the history sends them back: valid JSON, neutralised.

    Text that is not JSON becomes `{}` (a strict server refuses the request otherwise; the
    step keeps what the model wrote). Markers inside JSON strings are neutralised in the
    decoded value: a server decodes the arguments and renders them again, so a `\u003c|`
    escape would come back as a real `<|`.
    """
    try:
        value = strict_json(written)
    except UNREADABLE_JSON:
        return "{}"
    clean = neutralise_all(value)
    return written if clean == value else json.dumps(clean, ensure_ascii=False)


def extractive_summary(steps: list[Step]) -> str:
    """The fallback fold: tool names, arguments, first lines of results, errors."""
    lines = []
    for step in steps:
        for call in step.tool_calls:
            result = next((r for r in step.results if r.call_id == call.id), None)
            first = result.output.strip().splitlines()[0][:120] if result else "(no result)"
            status = result.status if result else "interrupted"
            lines.append(
                f"- step {step.index}: {call.name}({call.arguments[:200]}) {status}: {first}"
            )
        if not step.tool_calls and step.text.strip():
            lines.append(f"- step {step.index}: {step.text.strip().splitlines()[0][:200]}")
    return "\n".join(lines)


class Context:
    """The messages of one attempt's view, and the running summary behind it."""

    def __init__(
        self,
        system: str,
        task: str,
        lessons: list[str],
        protocol: Protocol,
        settings: CompressionSection,
        carried: str = "",
        approach: str = "",
    ) -> None:
        self.system = system
        self.task = task
        self.approach = approach
        """A way of working asked for after the task (a prompt variant: a plan first)."""
        self.carried = carried
        """The previous attempt, already rendered as quoted data (reflexion's carry-over)."""
        self.lessons = lessons
        self.protocol = protocol
        self.settings = settings
        self.summary = ""
        self.folded = 0
        """Steps before this index are in the summary, not in the view."""
        self.estimator = TokenEstimator()
        self._rendered: dict[int, tuple[Step, list[Message]]] = {}
        """Each step's messages by the step's id (the step kept, so its id is not reused)."""
        self._pinned: tuple[tuple[object, ...], str] | None = None
        """The pinned message and what it was rendered from."""

    def messages(self, steps: list[Step], tail: list[Message] | None = None) -> list[Message]:
        messages: list[Message] = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self._pinned_text()},
        ]
        for step in steps[self.folded :]:
            messages.extend(dict(message) for message in self._step_messages(step))
        return messages + (tail or [])

    def _step_messages(self, step: Step) -> list[Message]:
        cached = self._rendered.get(id(step))
        if cached is None or cached[0] is not step:
            cached = step, render_step(step, self.protocol)
            self._rendered[id(step)] = cached
        return cached[1]

    def _pinned_text(self) -> str:
        """Task, approach, carried attempt, lessons and summary: rendered again only when
        one of them changed (the summary, after a fold)."""
        source = (self.task, self.approach, self.carried, tuple(self.lessons), self.summary)
        if self._pinned is not None and self._pinned[0] == source:
            return self._pinned[1]
        pinned = [prompts.render("task", prompt=self.task)]
        if self.approach:
            pinned.append(self.approach)
        if self.carried:
            pinned.append(neutralise(self.carried))  # the Python API may pass any text
        if self.lessons:
            pinned.append(prompts.render("lessons", lessons=self.lessons))
        if self.summary:
            pinned.append(prompts.render("summary", summary=self.summary))
        self._pinned = source, "\n\n".join(pinned)
        return self._pinned[1]

    def view(
        self,
        steps: list[Step],
        model: ChatModel,
        tools: list[dict[str, Any]] | None,
        tail: list[Message],
        timeout: float | None = None,
    ) -> tuple[list[Message], tuple[CompressionEvent, Usage] | None]:
        """The messages to send, the oldest whole steps folded into the summary first when
        the view is over the threshold; `timeout` bounds the summarising call (the attempt's
        time left)."""
        messages = self.messages(steps, tail)
        keep = max(1, self.settings.keep_recent)
        if not self.settings.enabled or len(steps) - self.folded <= keep:
            return messages, None
        before = self.estimator.estimate(messages, tools)
        if before <= self.settings.threshold():
            return messages, None
        end = self._fold_end(steps, tools, tail, keep)
        folding = steps[self.folded : end]
        summary, method, usage = self._summarise(folding, model, timeout)
        self.summary, self.folded = summary, end
        messages = self.messages(steps, tail)
        event = CompressionEvent(
            before_step=len(steps),
            folded_steps=[s.index for s in folding],
            tokens_before=before,
            tokens_after=self.estimator.estimate(messages, tools),
            summary=summary,
            method=method,
        )
        return messages, (event, usage)

    def _fold_end(
        self,
        steps: list[Step],
        tools: list[dict[str, Any]] | None,
        tail: list[Message],
        keep: int,
    ) -> int:
        """Fold as few old steps as brings the view under the threshold, keeping `keep`."""
        limit = len(steps) - keep
        budget = (
            int(self.settings.threshold() * self.settings.fold_to)
            - self.settings.summary_max_tokens
        )
        end = self.folded + 1
        while end < limit:
            kept = steps[end:]
            rest = [m for s in kept for m in self._step_messages(s)]
            if self.estimator.estimate(self.messages([], tail) + rest, tools) <= budget:
                break
            end += 1
        return end

    def _summarise(
        self, folding: list[Step], model: ChatModel, timeout: float | None = None
    ) -> tuple[str, Literal["model", "extractive"], Usage]:
        cap = self.settings.summary_max_tokens
        steps_text = "\n".join(s.as_text(self.settings.observation_max_chars) for s in folding)
        prompt = prompts.render(
            "summarise",
            task=self.task,
            summary=self.summary,
            steps=steps_text,
            max_words=int(cap * 0.7),
        )
        try:
            response = model.chat(
                [{"role": "user", "content": prompt}], max_tokens=cap, timeout=timeout
            )
            text, spent = response.text.strip(), response.usage  # an empty one was served too
        except ModelError as exc:
            log.warning("summarising call failed (%s); folding extractively", exc)
            text, spent = "", Usage(unmetered_calls=exc.unmetered_calls)
        if text:
            return self._capped(text), "model", spent
        extractive = f"{self.summary}\n{extractive_summary(folding)}".strip()
        return self._capped(extractive), "extractive", spent

    def _capped(self, summary: str) -> str:
        """Keep the summary under its cap: the first notes and the latest, the cut marked."""
        max_chars = int(self.settings.summary_max_tokens * 4 / max(self.estimator.ratio, 0.25))
        if len(summary) <= max_chars:
            return summary
        marker = re.compile(r"^\[\.\.\. (\d+) notes cut \.\.\.\]$")
        earlier = sum(int(m.group(1)) for m in map(marker.match, summary.splitlines()) if m)
        lines = [line for line in summary.splitlines() if not marker.match(line)]
        head: list[str] = []
        tail: list[str] = []
        size = 0
        for line in lines[: len(lines) // 3]:
            if size + len(line) > max_chars // 3:
                break
            head.append(line)
            size += len(line) + 1
        for line in reversed(lines[len(head) :]):
            if size + len(line) > max_chars - 40:
                break
            tail.insert(0, line)
            size += len(line) + 1
        cut = len(lines) - len(head) - len(tail) + earlier
        return "\n".join([*head, f"[... {cut} notes cut ...]", *tail])
