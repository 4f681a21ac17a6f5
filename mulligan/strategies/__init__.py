"""The strategies, registered by name: one file each. Nothing outside this package compares
a strategy's name; it asks the strategy object instead.

Light on imports (no pydantic): the command line lists the names before any work."""

from __future__ import annotations

from dataclasses import replace

from mulligan.errors import UserError
from mulligan.strategies.base import Strategy
from mulligan.strategies.escalate import ESCALATE
from mulligan.strategies.memory_frozen import MEMORY_FROZEN, legacy
from mulligan.strategies.patch import AGENT_DEFAULT, AUTO, PATCH
from mulligan.strategies.react import REACT
from mulligan.strategies.reflexion import REFLEXION
from mulligan.strategies.reflexion_memory import REFLEXION_MEMORY
from mulligan.strategies.repair import REPAIR
from mulligan.strategies.retry import RETRY
from mulligan.strategies.select import SELECT, SELECT_DIVERSE
from mulligan.strategies.stopping import stop_rule as stop_rule  # re-exported
from mulligan.strategies.warming import WARMING

REGISTRY: dict[str, Strategy] = {
    s.name: s
    for s in (
        REACT,
        RETRY,
        WARMING,
        ESCALATE,
        REFLEXION,
        REFLEXION_MEMORY,
        REPAIR,
        MEMORY_FROZEN,
        SELECT,
        SELECT_DIVERSE,
        PATCH,
    )
}
NAMES: tuple[str, ...] = tuple(REGISTRY)
DEFAULT_STUDY: tuple[str, ...] = tuple(s.name for s in REGISTRY.values() if s.in_default_study)
LEARNER = REFLEXION_MEMORY.name
"""What the learning phase of a transfer study (bench --learn-on) runs over the training tasks."""
VERIFY_WITH, VERIFY_WITHOUT = MEMORY_FROZEN.name, REACT.name
"""Verification's pair (studies/verify.py): one attempt with the store's place in the prompt
showing the lesson tried (`Loop.shown`), one with no memory; each makes one trial."""
TRANSFER_STUDY: tuple[str, ...] = (REACT.name, REFLEXION.name, MEMORY_FROZEN.name)
"""Its test phase by default: without the memory (react's trial 1 is reflexion's), and with it
frozen; with --keep-learning the memory arm is the learner itself."""
BASELINES: tuple[str, ...] = (REACT.name, RETRY.name)
"""What a report sets every other strategy against: one attempt, and as many attempts with
nothing carried over."""


def get(name: str, flag: str = "") -> Strategy:
    """The strategy of that name, with its options in brackets (`memory-frozen[cases]`); an
    unknown name or option is the user's mistake."""
    found = known(name, flag)
    if found is None:
        where = f"{flag}: " if flag else ""
        raise UserError(f"{where}unknown strategy {name!r}: use one of {', '.join(NAMES)}")
    return found


def for_loop(name: str, flag: str = "") -> Strategy:
    """A strategy the loop can run (a pipeline of its own, such as `patch`, it cannot)."""
    strategy = get(name, flag)
    if strategy.outside_loop:
        where = f"{flag}: " if flag else ""
        raise UserError(
            f"{where}strategy {name!r} runs only under `mulligan solve`; choose another"
        )
    return strategy


def for_solve(name: str) -> Strategy | None:
    """solve's --strategy: a known strategy, or None for `auto` (chosen by the failure)."""
    if name == AUTO:
        return None
    given = parse(name, "--strategy")
    if len(given) > 1:
        named = ", ".join(repr(s.name) for s in given)
        raise UserError(
            f"--strategy: one strategy, not {len(given)} ({named}); "
            "`mulligan bench --strategies` compares several"
        )
    return given[0]


def may_run(name: str) -> list[Strategy]:
    """The strategies a run of this name may run: solve's `auto` may run either of its two."""
    given = for_solve(name)
    return [PATCH, agent_default()] if given is None else [given]


def agent_default() -> Strategy:
    """What `auto` runs when the failure does not suit the repair pipeline."""
    return REGISTRY[AGENT_DEFAULT]


def known(name: str, flag: str | None = None) -> Strategy | None:
    """The strategy a name stands for, with its options; None for a name this version does
    not have (a log may name one, or an option of a newer version's). A known name with an
    unknown option given by `flag` is the user's mistake."""
    base, bracket, words = name.partition("[")
    if bracket:
        if not words.endswith("]") or base not in REGISTRY:
            return None
        chosen = [w.strip() for w in words.removesuffix("]").split(",") if w.strip()]
        if flag is not None:
            return REGISTRY[base].with_options(chosen, flag)
        try:
            return REGISTRY[base].with_options(chosen)
        except UserError:  # a newer version's options
            return None
    return REGISTRY.get(name) or legacy(name)


def split_names(text: str) -> list[str]:
    """Comma-separated arms, a comma inside brackets belonging to the arm's options."""
    names, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            names.append(current.strip())
            current = ""
        else:
            current += char
    return [n for n in [*names, current.strip()] if n]


def parse(text: str, flag: str = "--strategies") -> list[Strategy]:
    """Comma-separated names, each known (with its options in brackets), at least one."""
    names = split_names(text)
    found = [known(n, flag) for n in names]
    unknown = [n for n, strategy in zip(names, found, strict=True) if strategy is None]
    if unknown or not names:
        named = f"unknown strategy {', '.join(map(repr, unknown))}" if unknown else "none given"
        raise UserError(f"{flag}: {named}; use {', '.join(NAMES)}")
    arms = [strategy for strategy in found if strategy is not None]
    refuse_twice(arms, flag)
    return arms


def refuse_twice(arms: list[Strategy], flag: str) -> None:
    """One arm named twice (`retry,retry`, or an old name beside its new one) would share its
    episodes with itself: the user's mistake."""
    seen: dict[Strategy, str] = {}
    for arm in arms:
        key = replace(arm, name="", summary="")
        if key in seen:
            earlier = seen[key]
            same = f"{arm.name!r}" + (f" (as {earlier!r})" if earlier != arm.name else "")
            raise UserError(f"{flag}: {same} given twice; name each arm once")
        seen[key] = arm.name
