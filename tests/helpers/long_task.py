"""A long scripted tool-using task, for the compression tests and benchmark."""

from __future__ import annotations

import json
from typing import Any

from mulligan.llm.base import Message
from mulligan.llm.scripted import Reply, reply, tool_call

LONG_TASK_FACT = "The vault code is 4417."
SUMMARISER_MARK = "You keep the working notes"


def is_summary_request(messages: list[Message]) -> bool:
    return bool(messages) and SUMMARISER_MARK in str(messages[0].get("content"))


class LongTaskScript:
    """A tool-using task of `steps` steps whose tools return ~2 KB each.

    Step 2's observation holds a fact (the vault code) that the final answer needs,
    so the answer is right only if the fact survives in the view (verbatim or in
    the running summary). The scripted summariser keeps lines that carry facts.
    """

    def __init__(
        self, steps: int = 30, observation_bytes: int = 2048, fail_summaries: bool = False
    ):
        self.steps = steps
        self.observation_bytes = observation_bytes
        self.fail_summaries = fail_summaries

    def tool_output(self, page: int) -> str:
        fact = f"{LONG_TASK_FACT}\n" if page == 2 else ""
        filler = f"page {page}: " + "lorem ipsum dolor sit amet " * 200
        return (fact + filler)[: self.observation_bytes]

    def policy(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> Reply:
        from mulligan.errors import ModelError

        if is_summary_request(messages):
            if self.fail_summaries:
                return ModelError("summariser unavailable (scripted failure)")
            prompt = str(messages[0]["content"])
            kept = [line.strip() for line in prompt.splitlines() if "code is" in line]
            return (
                "\n".join(dict.fromkeys(f"- {line.lstrip('-> ok:').strip()}" for line in kept))
                or "- nothing yet"
            )
        turns = sum(1 for m in messages if m["role"] == "assistant")
        folded = "Notes on your earlier steps" in str(messages[1].get("content"))
        done = turns + (self._folded_turns(messages) if folded else 0)
        if done + 1 >= self.steps or tools is None:
            view = " ".join(str(m.get("content")) for m in messages)
            return "The code is 4417." if "4417" in view else "I do not know the code."
        return reply("", tool_call("read_page", page=done + 1))

    @staticmethod
    def _folded_turns(messages: list[Message]) -> int:
        """How many pages were read before the oldest step still in view."""
        for message in messages:
            for call in message.get("tool_calls") or []:
                return int(json.loads(call["function"]["arguments"])["page"]) - 1
        return 0
