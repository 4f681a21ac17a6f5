"""Forged `python_tests` verdicts: each wrong candidate tries to make the check pass anyway and
must fail, with a detail that says why."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest

from mulligan.schema import (
    PythonTestsCheck,
)
from tests.helpers.boxing import (
    REPO,
    fenced,
    run_check,
)
from tests.helpers.forgeries import ADD_ASSERTS, ADD_CHECK, CORRECT_ADD, FORGERIES, STYLES

# ---------------------------------------------------------------- 1. forged verdicts

# What a failed check's detail may say about a forged run: loose on purpose.
EXPLAINS = ("exit", "kill", "signal", "report", "timed out", "interrupt", "fail", "error", "died")


def assert_explains(detail: str) -> None:
    assert detail.strip(), "the failed check gives no detail"
    assert any(word in detail.lower() for word in EXPLAINS), detail


@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("attack", sorted(FORGERIES))
def test_forged_verdict_fails(attack: str, style: str) -> None:
    check = PythonTestsCheck(**STYLES[style], timeout=5)  # type: ignore[arg-type]
    result = run_check(check, fenced(FORGERIES[attack]))
    assert not result.passed, f"{attack} forged a pass: {result.detail}"
    assert result.score < 1.0
    assert_explains(result.detail)


def test_handlers_for_the_kill_signals_do_not_turn_a_timeout_into_a_pass() -> None:
    code = (
        "import os, signal\n"
        "def _trap():\n"
        "    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):\n"
        "        signal.signal(sig, lambda *a: os._exit(0))\n"
        "def add(a, b, _=_trap()):\n    while True:\n        pass\n"
    )
    result = run_check(
        PythonTestsCheck(tests=ADD_CHECK, entry_point="add", timeout=2), fenced(code)
    )
    assert not result.passed, result.detail
    assert_explains(result.detail)


def test_monkeypatched_sys_exit_is_ignored_even_for_a_correct_count() -> None:
    # The candidate is right on 2 of 3 asserts and turns the final exit status into 0.
    code = (
        "import os, sys\n"
        "def add(a, b, _=setattr(sys, 'exit', lambda *args: os._exit(0))):\n"
        "    return a + b if a != 5 else 0\n"
    )
    result = run_check(PythonTestsCheck(tests=ADD_ASSERTS), fenced(code))
    assert not result.passed, result.detail
    assert result.score < 1.0


# Tests that lean on builtins or on modules, and candidates that patch exactly those.
PATCHED_BUILTINS = {
    "abs_patched": (
        "def check(candidate):\n"
        "    assert abs(candidate(3) - 1.5) < 1e-6\n"
        "    assert abs(candidate(5) - 2.5) < 1e-6\n",
        "import builtins\ndef half(x, _=setattr(builtins, 'abs', lambda v: 0)):\n    return 0\n",
    ),
    "isinstance_patched": (
        "def check(candidate):\n"
        "    assert isinstance(candidate(3), float) and str(candidate(3)) == '1.5'\n"
        "    assert isinstance(candidate(5), float) and str(candidate(5)) == '2.5'\n",
        "import builtins\n"
        "def _lie(obj, kind, _real=isinstance):\n"
        "    return True if kind is float else _real(obj, kind)\n"
        "def half(x, _=setattr(builtins, 'isinstance', _lie)):\n"
        "    return str(x / 2)\n",
    ),
    "sys_modules_math_replaced": (
        "def check(candidate):\n"
        "    import math\n"
        "    assert math.isclose(candidate(3), 1.5)\n"
        "    assert math.isclose(candidate(5), 2.5)\n",
        "import sys, types\n"
        "def _plant():\n"
        "    fake = types.ModuleType('math')\n"
        "    fake.isclose = lambda *a, **k: True\n"
        "    sys.modules['math'] = fake\n"
        "def half(x, _=_plant()):\n"
        "    return 0\n",
    ),
}


@pytest.mark.parametrize("attack", sorted(PATCHED_BUILTINS))
def test_monkeypatched_builtin_or_module_fails(attack: str) -> None:
    tests, code = PATCHED_BUILTINS[attack]
    check = PythonTestsCheck(tests=tests, entry_point="half", timeout=5)
    assert run_check(check, fenced("def half(x):\n    return x / 2\n")).passed  # tests are fair
    result = run_check(check, fenced(code))
    assert not result.passed, f"{attack} forged a pass: {result.detail}"
    assert result.score < 1.0


COPY_EXPECTED = (
    "import glob, inspect, linecache, os, re, sys\n"
    "def _sources():\n"
    "    texts = []\n"
    "    main = sys.modules.get('__main__')\n"
    "    paths = [sys.argv[0] if sys.argv else '', getattr(main, '__file__', None) or '',\n"
    "             '/proc/self/cmdline', '/proc/self/environ']\n"
    "    for d in {os.getcwd(), os.path.dirname(os.path.abspath(sys.argv[0] or '.')), '/tmp'}:\n"
    "        paths += glob.glob(os.path.join(d, '**'), recursive=True)[:500]\n"
    "    paths += glob.glob('/proc/self/fd/*') + glob.glob('/proc/*/cmdline')\n"
    "    for p in paths:\n"
    "        try:\n"
    "            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)\n"
    "            try:\n"
    "                texts.append(os.read(fd, 1 << 20).decode('utf-8', 'replace'))\n"
    "            finally:\n"
    "                os.close(fd)\n"
    "        except OSError:\n"
    "            pass\n"
    "    for info in inspect.stack():\n"
    "        texts.extend(info.code_context or [])\n"
    "        try:\n"
    "            texts.append(inspect.getsource(info.frame))\n"
    "        except (OSError, TypeError):\n"
    "            pass\n"
    "    for entry in list(linecache.cache.values()):\n"
    "        try:\n"
    "            texts.append(''.join(entry[2]))\n"
    "        except Exception:\n"
    "            pass\n"
    "    return '\\n'.join(texts)\n"
    "def lookup(x):\n"
    "    pattern = r'\\(\\s*' + re.escape(repr(x)) + r'\\s*\\)\\s*==\\s*(-?\\d+)'\n"
    "    for match in re.finditer(pattern, _sources()):\n"
    "        return int(match.group(1))\n"
    "    return -1\n"
)


@pytest.mark.parametrize("style", ["check_function", "plain_asserts"])
def test_copying_expected_values_from_the_test_source_fails(style: str) -> None:
    expected = {x: 100_000 + secrets.randbelow(900_000) for x in (3, 7, 11)}
    if style == "check_function":
        tests = "def check(candidate):\n" + "".join(
            f"    assert candidate({x}) == {value}\n" for x, value in expected.items()
        )
        check = PythonTestsCheck(tests=tests, entry_point="lookup", timeout=5)
    else:
        tests = "".join(f"assert lookup({x}) == {value}\n" for x, value in expected.items())
        check = PythonTestsCheck(tests=tests, timeout=5)
    result = run_check(check, fenced(COPY_EXPECTED))
    assert not result.passed, f"the candidate read the expected values: {result.detail}"
    assert result.score < 1.0


def test_killing_the_parent_fails_and_the_evaluator_survives() -> None:
    # Run in a separate interpreter: if the attack works, that interpreter dies, not pytest.
    driver = (
        "import json, sys\n"
        "from mulligan.evaluator import Evaluator\n"
        "from mulligan.schema import Attempt, PythonTestsCheck, Task\n"
        "spec = json.loads(sys.argv[1])\n"
        "task = Task(id='t', prompt='p', checks=[PythonTestsCheck(**spec['check'])])\n"
        "v = Evaluator().evaluate(task, Attempt(task_id='t', answer=spec['answer']), None)\n"
        "print(json.dumps({'passed': v.passed, 'detail': v.checks[0].detail}))\n"
    )
    code = (
        "import os, signal\n"
        "def add(a, b):\n"
        "    for sig in (signal.SIGKILL, signal.SIGTERM):\n"
        "        try:\n"
        "            os.kill(os.getppid(), sig)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 0\n"
    )
    spec = {
        "check": {"tests": ADD_CHECK, "entry_point": "add", "timeout": 5},
        "answer": fenced(code),
    }
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", driver, json.dumps(spec)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"the evaluator died ({done.returncode}): {done.stderr[-500:]}"
    verdict = json.loads(done.stdout.strip().splitlines()[-1])
    assert not verdict["passed"], verdict
    assert_explains(verdict["detail"])


@pytest.mark.parametrize("style", sorted(STYLES))
def test_correct_candidate_still_passes(style: str) -> None:
    result = run_check(PythonTestsCheck(**STYLES[style]), fenced(CORRECT_ADD))  # type: ignore[arg-type]
    assert result.passed, result.detail
    assert result.score == 1.0


@pytest.mark.parametrize("style", sorted(STYLES))
def test_wrong_candidate_without_tricks_fails(style: str) -> None:
    wrong = "def add(a, b):\n    return a - b\n"
    result = run_check(PythonTestsCheck(**STYLES[style]), fenced(wrong))  # type: ignore[arg-type]
    assert not result.passed and result.score < 1.0
    assert_explains(result.detail)


def test_plain_asserts_with_an_entry_point_and_no_check_function_pass() -> None:
    check = PythonTestsCheck(tests=ADD_ASSERTS, entry_point="add")
    result = run_check(check, fenced(CORRECT_ADD))
    assert result.passed, result.detail
    assert "NameError" not in result.detail
    wrong = run_check(check, fenced("def add(a, b):\n    return 0\n"))
    assert not wrong.passed and "NameError" not in wrong.detail
