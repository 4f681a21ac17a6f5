"""The curator: what a learning phase wrote, made into a playbook for other tasks (ACE's
curator between adaptation and test).

In this order: lessons that are no longer usable (refuted, superseded, expired, retracted)
or that were used and never helped are dropped; lessons that name their task ("In this
problem…", the task's function) are rewritten as general ones by one model call each
(`prompts/generalise.md`), or dropped when no model is given or the rewrite still names it;
near-duplicates (cosine of their embeddings at or above `merge_similarity`, same family and
kind) are merged into the more trusted one, which takes over their counters; the rest,
most trusted first, are kept up to `token_budget` tokens. Every decision is one lesson event
under the curation's tag, so a report rebuilds the playbook before and after from the log.
"""

from __future__ import annotations

import json
import logging
import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from mulligan import prompts
from mulligan.defaults import LESSON_BUDGET, MERGE_SIMILARITY
from mulligan.errors import ModelError
from mulligan.jsontext import first_json_object
from mulligan.llm.base import SHORT_REPLY_TOKENS, ChatModel
from mulligan.memory.lesson_log import to_status
from mulligan.memory.log import EpisodeLog
from mulligan.memory.memory import Memory
from mulligan.memory.store_reading import cosine
from mulligan.memory.validity import ACTIVE
from mulligan.schema import Lesson, PythonTestsCheck, Task, Usage

log = logging.getLogger("mulligan")

SPECIFIC = re.compile(
    r"\b(?:in|for|of|on) this (?:problem|task|question|exercise|function|prompt|challenge)\b"
    r"|\bthe (?:given|above|following) (?:problem|task|question|function|code)\b",
    re.IGNORECASE,
)
"""Phrases that tie a lesson to the one task it was written on."""
MIN_TEXT = 8
BEFORE, KEPT = "curator:before", "curator:kept"
DROPPED, WRITTEN = "curator:dropped", "curator:written"


def estimated_tokens(text: str) -> int:
    """Tokens of a text, estimated offline as the actor does (four characters a token)."""
    return math.ceil(len(text) / 4)


def task_names(task: Task | None) -> list[str]:
    """The identifiers a task brings (its function's name), which a general lesson avoids."""
    if task is None:
        return []
    target = task.code_target()  # nothing a hidden check alone holds goes to the model
    names = [target.entry_point] if target else []
    names += [
        c.entry_point or ""
        for c in task.checks
        if isinstance(c, PythonTestsCheck) and c.visibility == "feedback"
    ]
    return list(dict.fromkeys(name for name in names if name))


def names_its_task(text: str, task: Task | None) -> bool:
    """The lesson speaks of one task: "this problem", or the task's function by name (a name
    that is also an everyday word, such as `add`, only when written as a call or as code)."""
    if SPECIFIC.search(text):
        return True
    for name in task_names(task):
        distinctive = "_" in name or name != name.lower() or any(c.isdigit() for c in name)
        pattern = (
            rf"\b{re.escape(name)}\b"
            if distinctive
            else rf"`{re.escape(name)}`|\b{re.escape(name)}\("
        )
        if re.search(pattern, text):
            return True
    return False


@dataclass(frozen=True)
class CuratorSettings:
    merge_similarity: float = MERGE_SIMILARITY
    """Lessons at least this similar (cosine) are one lesson."""
    token_budget: int = LESSON_BUDGET
    """The playbook's size at most, in estimated tokens."""


@dataclass
class Curation:
    """The playbook before and after, and why each lesson left."""

    before: list[Lesson]
    kept: list[Lesson]
    dropped: dict[str, str] = field(default_factory=dict)
    """Lesson id -> the reason it is not in the playbook."""

    @staticmethod
    def tokens(lessons: list[Lesson]) -> int:
        return sum(estimated_tokens(lesson.text) for lesson in lessons)


class Curator:
    def __init__(
        self, memory: Memory, model: ChatModel | None, settings: CuratorSettings | None = None
    ) -> None:
        """`model` None: lessons that name their task are dropped, not rewritten."""
        self.memory, self.model = memory, model
        self.settings = settings or CuratorSettings()
        self.usage = Usage()

    def curate(self, lessons: list[Lesson], tasks: Mapping[str, Task], tag: str) -> Curation:
        """Make the playbook from `lessons` (stored ones); `tasks` by id, to know what each
        lesson's task is called; `tag` names the curation in the log."""
        before = list({lesson.id: lesson for lesson in lessons}.values())
        dropped: dict[str, str] = {}
        live = [lesson for lesson in before if not self._unfit(lesson, dropped)]
        live, written = self._generalised(live, tasks, tag, dropped)
        live = self._merged(_ranked(live), tag, dropped)
        kept, spent, budget = [], 0, self.settings.token_budget
        for lesson in _ranked(live):
            if spent + estimated_tokens(lesson.text) > budget:
                dropped[lesson.id] = f"over the token budget ({budget})"
                continue
            kept.append(lesson)
            spent += estimated_tokens(lesson.text)
        self._retract(before + written, dropped, tag)
        events = [(lesson.id, BEFORE, "") for lesson in before]
        events += [(lesson.id, WRITTEN, "") for lesson in written]
        events += [(lesson.id, KEPT, "") for lesson in kept]
        events += [(lesson_id, DROPPED, why) for lesson_id, why in dropped.items()]
        for lesson_id, event, detail in events:
            self.memory.log.lesson_event(lesson_id, event, episode_id=tag, detail=detail)
        return Curation(before, kept, dropped)

    def _unfit(self, lesson: Lesson, dropped: dict[str, str]) -> bool:
        v = lesson.validity
        if v.status not in ACTIVE:
            dropped[lesson.id] = v.status
        elif v.hurt and not v.helped:
            dropped[lesson.id] = f"never helped (used {v.hurt} times)"
        return lesson.id in dropped

    def _generalised(
        self, lessons: list[Lesson], tasks: Mapping[str, Task], tag: str, dropped: dict[str, str]
    ) -> tuple[list[Lesson], list[Lesson]]:
        """(the lessons with each that names its task replaced, the rewrites written)."""
        live: list[Lesson] = []
        written: list[Lesson] = []
        for lesson in lessons:
            task = tasks.get(lesson.source.task_id)
            if not names_its_task(lesson.text, task):
                live.append(lesson)
                continue
            text = self._rewrite(lesson, task)
            if text is None or names_its_task(text, task):
                dropped[lesson.id] = "named its task; no general rewrite"
                continue
            new = lesson.model_copy(deep=True, update={"id": uuid.uuid4().hex[:12], "text": text})
            new.scope.tags = [*new.scope.tags, "rewritten"][-8:]
            new.validity = type(new.validity)(expires_at=lesson.validity.expires_at)
            new = self.memory.keep(new, persistent=True)  # or the twin it says the same as
            self.memory.supersede(lesson, new.id, episode_id=tag)
            dropped[lesson.id] = f"named its task; rewritten as {new.id}"
            if all(other.id != new.id for other in live):
                live.append(new)
            written.append(new)
        return live, written

    def _rewrite(self, lesson: Lesson, task: Task | None) -> str | None:
        if self.model is None:
            return None
        prompt = prompts.render(
            "generalise",
            task=(task.prompt[:1500] if task else "(not known)"),
            names=", ".join(task_names(task)),
            lesson=lesson.text,
        )
        try:
            response = self.model.chat(
                [{"role": "user", "content": prompt}], max_tokens=SHORT_REPLY_TOKENS
            )
        except ModelError as exc:
            log.warning("the curator could not rewrite lesson %s: %s", lesson.id, exc)
            return None
        self.usage = self.usage + response.usage
        found = first_json_object(response.text) or {}
        text = str(found.get("lesson", "")).strip()
        return text if len(text) >= MIN_TEXT else None

    def _merged(self, ranked: list[Lesson], tag: str, dropped: dict[str, str]) -> list[Lesson]:
        """Each lesson, most trusted first, folded into an earlier one it nearly repeats."""
        vectors = self.memory.store.vectors([lesson.id for lesson in ranked])
        keepers: list[Lesson] = []
        for lesson in ranked:
            twin = next((k for k in keepers if self._near(vectors, k, lesson)), None)
            if twin is None:
                keepers.append(lesson)
                continue
            self._absorb(twin, lesson, tag)
            dropped[lesson.id] = f"merged into {twin.id}"
        return keepers

    def _near(self, vectors: dict[str, list[float]], a: Lesson, b: Lesson) -> bool:
        """Of one family and kind, and embedded at least `merge_similarity` alike."""
        same = (a.scope.family, a.kind) == (b.scope.family, b.kind)
        if not same or a.id not in vectors or b.id not in vectors:
            return False
        return cosine(vectors[a.id], vectors[b.id]) >= self.settings.merge_similarity

    def _absorb(self, keeper: Lesson, twin: Lesson, tag: str) -> None:
        """The keeper takes over the twin's uses; the twin is superseded by it."""
        taken = twin.validity

        def add(lesson: Lesson) -> list[str]:
            v = lesson.validity
            v.retrieved, v.helped = v.retrieved + taken.retrieved, v.helped + taken.helped
            v.hurt, v.reinforced = v.hurt + taken.hurt, v.reinforced + taken.reinforced + 1
            return []

        (fresh,) = self.memory.change([keeper], "merged", add, episode_id=tag, details=[twin.id])
        keeper.validity = fresh.validity
        self.memory.supersede(twin, keeper.id, episode_id=tag)

    def _retract(self, lessons: list[Lesson], dropped: dict[str, str], tag: str) -> None:
        """Dropped lessons still usable are retracted: retrieval no longer finds them."""
        now = {lesson.id: lesson for lesson in self.memory.lessons([x.id for x in lessons])}
        usable = [now[i] for i in dropped if i in now and now[i].validity.status in ACTIVE]
        details = [f"by the curator: {dropped[lesson.id]}" for lesson in usable]
        retracted = to_status("retracted")
        self.memory.change(usable, "status:retracted", retracted, episode_id=tag, details=details)


def _ranked(lessons: list[Lesson]) -> list[Lesson]:
    """Most trusted first: confidence, then help, then the earlier written."""
    return sorted(
        lessons,
        key=lambda x: (-x.validity.confidence, -x.validity.helped, x.source.created_at, x.id),
    )


def curation_of(log: EpisodeLog, tag: str) -> Curation | None:
    """The curation made under `tag`, read back from the log (None: none was made)."""
    events = [e for e in log.lesson_events() if e["episode_id"] == tag]
    if not events:
        return None
    ids = {name: [e["lesson_id"] for e in events if e["event"] == name] for name in (BEFORE, KEPT)}
    dropped = {e["lesson_id"]: e["detail"] for e in events if e["event"] == DROPPED}
    return Curation(log.lessons(ids[BEFORE]), log.lessons(ids[KEPT]), dropped)


def lessons_written_by(log: EpisodeLog, run_id: str) -> list[Lesson]:
    """The general lessons a run's episodes stored (or strengthened), in the order written."""
    ids = [i for e in log.episodes(run_id) for i in json.loads(e["lessons_written"] or "[]")]
    ids = list(dict.fromkeys(ids))
    stored = log.stored_ids(ids)
    return [x for x in log.lessons(ids) if x.id in stored and x.kind != "diagnosis"]
