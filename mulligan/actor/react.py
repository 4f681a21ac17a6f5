"""The ReAct actor: one attempt at a task, with tools, under a budget."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mulligan import prompts
from mulligan.actor.budget import BudgetSection, Spend
from mulligan.actor.context import CompressionSection, Context, Protocol
from mulligan.actor.text_protocol import (
    STOP_SEQUENCES,
    Action,
    ActionWatch,
    FinalAnswer,
    acted_on,
    parse_text_turn,
    strip_final_label,
)
from mulligan.actor.text_tool_calls import recover_text_tool_calls
from mulligan.actor.tools import Approver, Tool, ToolRegistry, ToolThreads
from mulligan.errors import DeadlineExceeded, ModelError
from mulligan.jsontext import UNREADABLE_JSON
from mulligan.llm.base import ChatModel, ChatResponse, Message
from mulligan.schema import (
    Attempt,
    BudgetOverrides,
    Step,
    StopReason,
    ToolCall,
    ToolResult,
    Usage,
)


@dataclass(frozen=True)
class ActorSettings:
    protocol: Protocol = "native"
    budget: BudgetSection = field(default_factory=BudgetSection)
    nudge_repeats: bool = True
    compression: CompressionSection = field(default_factory=CompressionSection)
    forced: tuple[str, ...] = ()
    """Budget fields the user set for this run (flags): a task's own budget keeps them."""
    nudge_no_tools: bool = False
    """An answer before any tool call is sent back once, asking for the tools (`solve`)."""
    read_to_action: bool = True
    """Text protocol: a reply is read only until its first action is written whole
    (`ActionWatch`); a model that streams (a self-hosted server) stops generating there."""

    def budget_for(self, overrides: BudgetOverrides | None) -> BudgetSection:
        """Defaults, then the task's own budget, then the user's flags."""
        merged = self.budget.overridden(overrides)
        return merged.model_copy(update={name: getattr(self.budget, name) for name in self.forced})


class Actor:
    def __init__(
        self,
        model: ChatModel,
        settings: ActorSettings | None = None,
        approve: Approver | None = None,
    ) -> None:
        self.model = model
        self.settings = settings or ActorSettings()
        self.approve = approve
        self._tool_threads = ToolThreads()
        """Kept from one attempt to the next, as from one call to the next."""

    def run(
        self,
        task_id: str,
        prompt: str,
        tools: list[Tool],
        *,
        lessons: list[str] | None = None,
        lesson_ids: list[str] | None = None,
        carried: str = "",
        trial: int = 1,
        budget: BudgetSection | None = None,
        on_step: Callable[[Step], None] | None = None,
        resume: list[Step] | None = None,
        temperature: float | None = None,
        approach: str | None = None,
    ) -> Attempt:
        """Attempt the task once; every attempt ends with a stop_reason, never a crash.

        `on_step` sees every step as soon as its tool results are in (for logging);
        `resume` continues an interrupted attempt from its logged (repaired) steps;
        `temperature` is every actor call's (None: the model's own); `approach` names a
        prompt file pinned after the task (a way of working, such as a plan first).
        """
        s = self.settings
        registry = ToolRegistry.of(
            tools,
            approve=self.approve,
            max_output_chars=s.compression.observation_max_chars,
            threads=self._tool_threads,
        )
        native = s.protocol == "native"
        schemas = registry.schemas() if native and tools else None
        asked = prompts.render(approach) if approach else ""
        context = Context(
            self._system(registry), prompt, lessons or [], s.protocol, s.compression, carried,
            approach=asked,
        )  # fmt: skip
        spend = Spend(budget or s.budget)
        attempt = Attempt(
            task_id=task_id,
            trial=trial,
            model=self.model.name,
            protocol=s.protocol,
            lesson_ids=lesson_ids or [],
            steps=[step.closed() for step in resume or []],
            drawn_temperature=temperature,
            approach=approach,
        )
        spend.resume(attempt.steps)
        seen = {  # an interrupted call may be made again
            _call_key(call)
            for step in attempt.steps
            for call, result in zip(step.tool_calls, step.results, strict=False)
            if result.status != "interrupted"
        }
        use_tools = (  # the nudge to an answer given before any tool call
            prompts.render("use_tools", protocol=s.protocol, tool_names=", ".join(registry.tools))
            if s.nudge_no_tools and registry.tools
            else ""
        )
        answered = bool(attempt.steps) and attempt.steps[-1].kind == "final"
        stop: StopReason | None = "answered" if answered else None  # (before a crash: resumed)
        attempt.final_forced = answered and attempt.steps[-1].forced
        while stop is None and (stop := spend.exhausted()) is None:
            last = spend.last_call()
            final = prompts.render("final_answer", protocol=s.protocol) if last else ""
            tail = [{"role": "user", "content": final}] if last else []
            offered = None if last else schemas
            messages, folded = context.view(
                attempt.steps, self.model, offered, tail, spend.seconds_left()
            )
            if folded:
                attempt.compressions.append(folded[0])
                spend.record(folded[1], "summariser")
                if (stop := spend.exhausted()) is not None:
                    break  # the fold spent what was left
            try:
                response = self._chat(
                    messages, offered, spend.seconds_left(), spend.budget.max_reply_tokens,
                    temperature,
                )  # fmt: skip
            except ModelError as exc:  # cut off at the time budget, or the endpoint failed
                spend.record(Usage(unmetered_calls=exc.unmetered_calls))
                timed_out = isinstance(exc, DeadlineExceeded)
                stop, attempt.error = "max_seconds" if timed_out else "model_error", str(exc)
                break
            spend.record(response.usage)
            context.estimator.calibrate(messages, offered, response.usage.prompt_tokens)
            step = self._read_turn(response, len(attempt.steps), registry, forced=bool(last))
            if response.finish_reason == "length":  # told so, whatever of it could be run
                limit = spend.budget.max_reply_tokens
                cut = f"it was cut off at the {limit}-token reply limit; reply more briefly"
                if step.tool_calls:
                    step.feedback = prompts.render("reply_cut", limit=limit)
                else:
                    self._format_error(step, cut, list(registry.tools))
            step.fold_usage = folded[1] if folded else step.fold_usage
            acted = any(st.tool_calls or st.feedback == use_tools for st in attempt.steps)
            if use_tools and step.kind == "final" and not last and not acted:
                step.kind, step.feedback = "act", use_tools  # once: the next answer stands
            spend.format_errors = spend.format_errors + 1 if step.kind == "format_error" else 0
            if on_step and step.tool_calls:
                on_step(step)  # logged before the tools run: a crash leaves calls to repair
            deadline = spend.started + spend.budget.max_seconds  # time.monotonic()'s
            step.results = self._run_calls(step.tool_calls, registry, seen, deadline)
            spend.count_repeats(step)
            attempt.steps.append(step)
            if on_step:
                on_step(step)
            if step.kind == "final":
                stop, attempt.final_forced = "answered", step.forced
            elif last:
                stop = last
        if stop == "answered":
            attempt.answer = strip_final_label(attempt.steps[-1].text)
        attempt.stop_reason = stop
        attempt.usage, attempt.usage_by_role = spend.usage, dict(spend.usage_by_role)
        attempt.seconds = spend.elapsed()
        return attempt

    # ------------------------------------------------------------ pieces of the loop

    def _system(self, registry: ToolRegistry) -> str:
        if self.settings.protocol == "native":
            return prompts.render("actor_native")
        return prompts.render(
            "actor_text",
            tools=[t.signature_line() for t in registry.tools.values()],
            tool_names=", ".join(registry.tools),
        )

    def _chat(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        timeout: float,
        max_tokens: int,
        temperature: float | None,
    ) -> ChatResponse:
        text = self.settings.protocol == "text"
        stop = STOP_SEQUENCES if text else None
        until = ActionWatch if text and self.settings.read_to_action and tools is None else None
        # sent only when set: a ChatModel of the Python API may predate the keyword
        more: dict[str, Any] = {} if temperature is None else {"temperature": temperature}
        return self.model.chat(
            messages, tools=tools, stop=stop, timeout=timeout, max_tokens=max_tokens, until=until,
            **more,
        )  # fmt: skip

    def _read_turn(
        self, response: ChatResponse, index: int, registry: ToolRegistry, forced: bool
    ) -> Step:
        step = Step(
            index=index,
            text=response.text,
            usage=response.usage,
            latency_s=response.latency_s,
            finish_reason=response.finish_reason,
            seed=response.seed,
            fingerprint=response.fingerprint,
            forced=forced,
        )
        names = list(registry.tools)
        if self.settings.protocol == "text":
            parsed = parse_text_turn(response.text, names)
            if isinstance(parsed, FinalAnswer):
                step.kind, step.text = "final", f"Final Answer: {parsed.text}"
            elif isinstance(parsed, Action) and not forced:
                call = ToolCall(id=f"call_{index}_0", name=parsed.name, arguments=parsed.arguments)
                step.tool_calls = [call]
                step.text, step.discarded = acted_on(response.text)
            else:
                reason = parsed.reason if not isinstance(parsed, Action) else "no answer given"
                self._format_error(step, reason, names)
            return step
        calls = response.tool_calls
        if not calls:  # the text, less what was recovered (unchanged when nothing was)
            calls, step.text = recover_text_tool_calls(response.text, index)
        if calls and not forced:
            step.tool_calls = _unique_ids(calls, index)
        elif strip_final_label(response.text) and not calls:  # "Final Answer:" alone is none
            step.kind = "final"
        else:
            self._format_error(step, "an empty reply" if not calls else "no answer given", names)
        return step

    def _format_error(self, step: Step, reason: str, names: list[str]) -> None:
        step.kind = "format_error"
        step.feedback = prompts.render(
            "format_reminder",
            reason=reason,
            protocol=self.settings.protocol,
            tool_names=", ".join(names),
        )

    def _run_calls(
        self, calls: list[ToolCall], registry: ToolRegistry, seen: set[str], deadline: float
    ) -> list[ToolResult]:
        """Exactly one result per call, in call order; repeats get a nudge instead of a rerun."""
        fresh: list[ToolCall] = []
        nudges: dict[str, ToolResult] = {}
        for call in calls:
            key = _call_key(call)
            if self.settings.nudge_repeats and key in seen:
                nudge = prompts.render("repeated_call", name=call.name)
                nudges[call.id] = ToolResult(
                    call_id=call.id, name=call.name, status="repeated", output=nudge
                )
            else:
                seen.add(key)
                fresh.append(call)
        ran = {r.call_id: r for r in registry.run_all(fresh, deadline)}
        for call in fresh:  # after a write, what was seen before may be stale
            made = registry.tools.get(call.name)
            if made and made.changes_state and ran[call.id].status == "ok":
                seen.clear()
                seen.add(_call_key(call))
        return [nudges.get(call.id) or ran[call.id] for call in calls]


def _call_key(call: ToolCall) -> str:
    try:
        arguments = json.dumps(json.loads(call.arguments), sort_keys=True)
    except UNREADABLE_JSON:
        arguments = call.arguments
    return f"{call.name}\x00{arguments}"


def _unique_ids(calls: list[ToolCall], index: int) -> list[ToolCall]:
    """Some servers repeat or omit call ids; every call needs its own to pair its result."""
    ids = [c.id for c in calls]
    if all(ids) and len(set(ids)) == len(ids):
        return calls
    return [c.model_copy(update={"id": f"call_{index}_{n}"}) for n, c in enumerate(calls)]
