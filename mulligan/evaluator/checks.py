"""One function per check type: (check, answer, context) -> CheckResult."""

from __future__ import annotations

import ast
import importlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mulligan import prompts, sandbox
from mulligan.errors import ModelError
from mulligan.evaluator.code import harness_report, keep_definitions, last_code_block
from mulligan.evaluator.normalize import exact_match, f1_score
from mulligan.jsontext import first_json_object
from mulligan.llm.base import SHORT_REPLY_TOKENS, ChatModel
from mulligan.sandbox.safe_files import Unreadable, read_workspace_file
from mulligan.schema import (
    Attempt,
    CallableCheck,
    Check,
    CheckResult,
    CommandCheck,
    ContainsCheck,
    ExactMatchCheck,
    FileCheck,
    LLMJudgeCheck,
    NumericCheck,
    PythonTestsCheck,
    RegexCheck,
    Task,
)
from mulligan.text_cut import head_and_tail, last_lines


@dataclass
class CheckContext:
    task: Task
    attempt: Attempt
    workspace: Path | None
    judge: ChatModel | None = None
    policy: sandbox.Policy | None = None
    """What the box hides from code a check runs (the suite's answers, mulligan's memory)."""

    @property
    def answer(self) -> str:
        return self.attempt.answer or ""


CANNOT_START = (126, 127)
"""The shell's exit statuses for a command it found but could not run, or did not find."""


def result(
    check: Check,
    passed: bool,
    detail: str,
    score: float | None = None,
    *,
    environment: bool | None = None,
) -> CheckResult:
    """`environment`: the check failed for a reason the attempt could not cause (by default,
    one that says it "cannot run")."""
    return CheckResult(
        type=check.type,
        name=check.name or check.type,
        visibility=check.visibility,
        passed=passed,
        score=float(passed) if score is None else score,
        detail=detail,
        environment=detail.startswith("cannot run") if environment is None else environment,
    )


def check_exact_match(check: ExactMatchCheck, ctx: CheckContext) -> CheckResult:
    golds = [check.answer] if isinstance(check.answer, str) else check.answer
    passed = any(exact_match(ctx.answer, gold) for gold in golds)
    f1 = max(f1_score(ctx.answer, gold) for gold in golds)
    if passed:
        return result(check, True, f"exact match (F1 {f1:.2f})")
    expected = f"; expected {golds[0]!r}" if check.reveal else ""
    return result(
        check, False, f"answer {ctx.answer!r} is not an exact match (F1 {f1:.2f}){expected}"
    )


def check_contains(check: ContainsCheck, ctx: CheckContext) -> CheckResult:
    haystack, needle = ctx.answer, check.text
    if not check.case_sensitive:
        haystack, needle = haystack.lower(), needle.lower()
    if needle in haystack:
        return result(check, True, f"answer contains {check.text!r}")
    expected = repr(check.text) if check.reveal else "the expected text"
    return result(check, False, f"answer does not contain {expected}")


def check_regex(check: RegexCheck, ctx: CheckContext) -> CheckResult:
    flags = 0
    for letter in check.flags:
        flags |= {"i": re.I, "m": re.M, "s": re.S, "x": re.X}.get(letter, 0)
    try:
        match = re.search(check.pattern, ctx.answer, flags)
    except re.error as exc:
        return result(check, False, f"cannot run: bad regex {check.pattern!r}: {exc}")
    if match:
        return result(check, True, f"matched {match.group(0)[:100]!r}")
    expected = f"/{check.pattern}/" if check.reveal else "the expected pattern"
    return result(check, False, f"answer does not match {expected}")


_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


def numbers_in(text: str) -> list[float]:
    found = []
    for token in _NUMBER.findall(text):
        if any(ch.isdigit() for ch in token):
            try:
                found.append(float(token.replace(",", "")))
            except ValueError:
                continue
    return found


def check_numeric(check: NumericCheck, ctx: CheckContext) -> CheckResult:
    found = numbers_in(ctx.answer)
    found = {"any": found, "first": found[:1], "last": found[-1:]}[check.pick]
    tolerance = {"rel_tol": check.rel_tol, "abs_tol": check.abs_tol}
    close = [n for n in found if math.isclose(n, check.value, **tolerance)]
    if close:
        return result(check, True, f"found {close[0]:g}, expected {check.value:g}")
    seen = ", ".join(f"{n:g}" for n in found) or "no number"
    near = "within tolerance of the expected value"
    if check.reveal:
        detail = f"expected {check.value:g} (±{check.abs_tol:g}); answer has {seen}"
    elif not found:
        detail = "answer has no number; the expected value is a number"
    elif check.pick == "any":
        detail = f"answer has {seen}: none is {near}"
    else:
        detail = f"answer's {check.pick} number is {seen}: not {near}"
    return result(check, False, detail)


def candidate_code(check: PythonTestsCheck, ctx: CheckContext) -> str | CheckResult:
    if check.file:
        if ctx.workspace is None:
            return result(check, False, f"cannot run: no workspace to read {check.file} from")
        try:
            return read_workspace_file(ctx.workspace, check.file)
        except Unreadable as exc:  # the attempt's doing, as for a file check
            return result(check, False, str(exc))
    if not ctx.answer.strip():
        return result(check, False, "no code: the attempt gave no answer")
    return last_code_block(ctx.answer)


def check_python_tests(check: PythonTestsCheck, ctx: CheckContext) -> CheckResult:
    """Passes only on the harness's own report that every test ran and passed."""
    code = candidate_code(check, ctx)
    if isinstance(code, CheckResult):
        return code
    try:
        ast.parse(check.tests)
    except SyntaxError as exc:
        return result(check, False, f"cannot run: the tests do not parse: {exc}")
    run = sandbox.run_tests(
        keep_definitions(code),
        check.tests,
        check.entry_point,
        check.prelude,
        sandbox.Limits(timeout=check.timeout, network=ctx.task.network),
        reveal=check.reveal,
        policy=ctx.policy,
    )
    report = harness_report(run.report or "")
    if report is None and run.exit_code in CANNOT_START and not run.timed_out:
        # The judge ends with os._exit(0) and nothing the candidate does exits it with 126 or
        # 127: the box could not start the interpreter at all (a path its user cannot reach).
        why = " ".join(last_lines(run.stderr, 3)) or "no message"
        return result(
            check, False, f"cannot run: the test interpreter could not start "
            f"(exit {run.exit_code}): {why}", 0.0,
        )  # fmt: skip
    if report is None:
        return result(check, False, _no_report(run), 0.0)
    total, failures = report["tests"], report["failures"]
    passed_count = max(0, total - sum(f.startswith(("FAILED", "ERROR")) for f in failures))
    score = passed_count / total if total else 0.0
    summary = f"{passed_count}/{total} tests passed"
    if total and not failures:
        return result(check, True, summary, score)
    if not total and not failures:
        failures = ["the tests ran no test"]
    return result(check, False, "\n".join([*failures, *_candidate_output(run), summary]), score)


def _no_report(run: sandbox.RunResult) -> str:
    """Why the harness said nothing: the candidate's doing, in the candidate's own words."""
    if run.timed_out:
        why = f"timed out after {run.seconds:.1f}s; every process killed"
    elif run.exit_code is not None and run.exit_code < 0:
        why = f"the test run was killed ({sandbox.signal_name(run.exit_code).lstrip(': ')})"
    else:
        why = f"the test run ended (exit status {run.exit_code}) before the tests reported"
    return "\n".join([f"FAILED: {why}; no test result, so no pass", *_candidate_output(run)])


def _candidate_output(run: sandbox.RunResult) -> list[str]:
    lines = []
    if run.stdout.strip():
        lines.append("[candidate's stdout]\n" + head_and_tail(run.stdout.strip(), 1000))
    if run.stderr.strip():  # the end of a traceback, the box's script path removed
        tail = last_lines(run.stderr, 8)
        script = re.compile(r'File "[^"]*(main|harness)\.py"')
        lines.append("\n".join(script.sub('File "<candidate>"', line) for line in tail))
    return lines


def run_command(
    check: CommandCheck, workspace: Path, network: bool, policy: sandbox.Policy | None
) -> sandbox.RunResult:
    """A command check's run: in the box, in the workspace (which it may write)."""
    limits = sandbox.Limits(
        timeout=check.timeout, cpu_seconds=int(check.timeout) + 1, network=network
    )
    return sandbox.run_shell(
        check.command, cwd=workspace, writable=True, limits=limits, policy=policy
    )


def check_command(check: CommandCheck, ctx: CheckContext) -> CheckResult:
    if ctx.workspace is None:
        return result(check, False, "cannot run: the task has no workspace")
    run = run_command(check, ctx.workspace, ctx.task.network, ctx.policy)
    cannot_start = run.exit_code in CANNOT_START and not run.timed_out
    detail = f"$ {check.command}\n{run.describe()}"
    return result(check, run.ok, detail, environment=cannot_start)


def check_file(check: FileCheck, ctx: CheckContext) -> CheckResult:
    if ctx.workspace is None:
        return result(check, False, "cannot run: the task has no workspace")
    try:
        text = read_workspace_file(ctx.workspace, check.path)
    except Unreadable as exc:
        return result(check, False, str(exc))
    if check.contains is not None and check.contains not in text:
        shown = f" {check.contains!r}" if check.reveal else " the expected text"
        return result(check, False, f"{check.path} does not contain{shown}")
    if check.matches is not None:
        try:
            if not re.search(check.matches, text, re.M):
                shown = f" /{check.matches}/" if check.reveal else " the pattern"
                return result(check, False, f"{check.path} does not match{shown}")
        except re.error as exc:
            return result(check, False, f"cannot run: bad regex {check.matches!r}: {exc}")
    matched = " and matches" if check.contains or check.matches else ""
    return result(check, True, f"{check.path} exists{matched}")


def check_llm_judge(check: LLMJudgeCheck, ctx: CheckContext) -> CheckResult:
    if ctx.judge is None:
        return result(check, False, "cannot run: no judge model configured")
    prompt = prompts.render("judge", task=ctx.task.prompt, answer=ctx.answer, rubric=check.rubric)
    try:
        reply = ctx.judge.chat(
            [{"role": "user", "content": prompt}], max_tokens=SHORT_REPLY_TOKENS
        ).text
    except ModelError as exc:
        return result(check, False, f"cannot run: judge model failed: {exc}")
    verdict = first_json_object(reply)
    if verdict is None or not isinstance(verdict.get("pass"), bool):
        return result(
            check, False, f'cannot run: judge reply is not {{"pass": bool, ...}}: {reply[:200]!r}'
        )
    reason = str(verdict.get("reason", ""))[:500]
    if verdict["pass"] or check.reveal:
        return result(check, verdict["pass"], reason)
    withheld = "its reason may name the expected answer, so it is shown only with reveal: true"
    return result(check, False, f"the judge found the rubric not met ({withheld})")


def check_callable(check: CallableCheck, ctx: CheckContext) -> CheckResult:
    module_name, _, function_name = check.function.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError, ValueError) as exc:
        return result(check, False, f"cannot run: cannot import {check.function}: {exc}")
    try:
        value = function(answer=ctx.answer, attempt=ctx.attempt, workspace=ctx.workspace)
    except Exception as exc:  # the user's check failing is a failed check, not a crash
        return result(check, False, f"{check.function} raised {type(exc).__name__}: {exc}")
    if isinstance(value, CheckResult):  # the check's own name and visibility, whatever it says
        own = {"type": check.type, "name": check.name or check.type}
        return value.model_copy(update={**own, "visibility": check.visibility})
    if isinstance(value, tuple):
        return result(check, bool(value[0]), str(value[1]))
    return result(check, bool(value), f"{check.function} returned {value!r}")


RUNNERS: dict[str, Callable[[Any, CheckContext], CheckResult]] = {
    "exact_match": check_exact_match,
    "contains": check_contains,
    "regex": check_regex,
    "numeric": check_numeric,
    "python_tests": check_python_tests,
    "command": check_command,
    "file": check_file,
    "llm_judge": check_llm_judge,
    "callable": check_callable,
}
