"""Every command's flags, and nothing else: building the parser imports only argparse and
`mulligan.defaults`, so `--help` starts fast. A command's handler is named as
"module:function" and imported only when that command runs (`handler_of`)."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import NoReturn

from mulligan.cli import style as cli_style
from mulligan.defaults import (
    CARRY_MODES,
    DATA_ENV,
    DATASET_NAMES,
    DEFAULT_MEMORY,
    DESIGNS,
    LESSON_BUDGET,
    MERGE_SIMILARITY,
    MIN_SIMILARITY,
    user_config_path,
)
from mulligan.strategies import DEFAULT_STUDY, STOP_RULES, TRANSFER_STUDY
from mulligan.strategies import NAMES as STRATEGIES

Handler = Callable[[argparse.Namespace], int]
Commands = argparse._SubParsersAction  # type: ignore[type-arg]


class Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (exit 2) instead of the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def handler_of(args: argparse.Namespace) -> Handler:
    """The function that runs the parsed command, imported now."""
    module, _, name = str(args.handler).partition(":")
    function: Handler = getattr(importlib.import_module(module), name)
    return function


def similarity(text: str) -> float:
    """A cosine similarity floor: a number from -1 to 1."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not -1.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a cosine similarity from -1 to 1")
    return value


def count(text: str) -> int:
    """A whole number, 0 or more."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 0 or more")
    return int(text)


# ---------------------------------------------------------------- shared flag groups


def add_self_tests_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--self-tests",
        type=count,
        metavar="N",
        help="before trial 1 the model writes up to N asserts from the prompt alone; they are "
        "visible checks of every attempt (Reflexion's internal tests; code tasks; default 0)",
    )


def add_network_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--network", action="store_true", help="let the box reach the network (default: none)"
    )


def add_mcp_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mcp",
        action="append",
        metavar="CMD",
        help="start an MCP server (stdio) and offer its tools as SERVER_TOOL: 'python srv.py' "
        "or 'NAME=python srv.py' (repeatable; replaces mulligan.toml's mcp list)",
    )


def add_endpoint_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("endpoint")
    group.add_argument("--base-url", help="OpenAI-compatible endpoint (or OPENAI_BASE_URL)")
    group.add_argument("--api-key", help="API key (or OPENAI_API_KEY)")
    group.add_argument(
        "--model",
        help="model name (or MULLIGAN_MODEL); `local` or `local:PATH.gguf`: llama.cpp on this CPU",
    )
    group.add_argument("--temperature", type=float)
    group.add_argument("--timeout", type=float, help="seconds per model call")
    group.add_argument("--protocol", choices=["native", "text"], help="tool calling style")
    group.add_argument("--price-in", type=float, help="US$ per million prompt tokens")
    group.add_argument("--price-out", type=float, help="US$ per million completion tokens")


def add_budget_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("budget (overrides a task's own)")
    group.add_argument("--max-steps", type=int)
    group.add_argument("--max-tokens", type=int)
    group.add_argument("--max-seconds", type=float)
    group.add_argument("--max-cost", type=float)
    group.add_argument("--max-format-errors", type=int)
    group.add_argument("--max-repeats", type=int)
    group.add_argument(
        "--max-reply-tokens", type=int, help="cap on each model reply (default 2048)"
    )
    group.add_argument(
        "--no-compression", action="store_true", default=None, help="send the full history"
    )
    group.add_argument("--compress-at", type=int, help="fold old steps above this many tokens")
    group.add_argument("--keep-recent", type=int, help="steps always kept verbatim (default 3)")
    group.add_argument("--summary-cap", type=int, help="running summary's token cap (600)")
    group.add_argument("--context-window", type=int, help="the model's context, in tokens")


def add_selection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", help="humaneval, mbpp, hotpotqa, examples, or a task file/dir")
    parser.add_argument("--data", help="the dataset file for mbpp or hotpotqa")
    parser.add_argument("--feedback", choices=["em", "hidden"], default="em", help="hotpotqa")
    parser.add_argument("--limit", type=int, help="the first N tasks")
    parser.add_argument("--ids", help="comma-separated task ids")
    parser.add_argument("--sample", type=int, help="a seeded random sample of N tasks")
    parser.add_argument("--seed", type=int, default=0)
    add_network_flag(parser)


def add_run_flags(parser: argparse.ArgumentParser, memory_default: str) -> None:
    """What `run`, `bench` and `solve` share: trials, memory, resume, concurrency, endpoint,
    budget."""
    parser.add_argument("--trials", type=int, help="attempts per task (default 3; not for react)")
    parser.add_argument("--memory", help=f"memory directory or chroma URL ({memory_default})")
    parser.add_argument("--embedding", help="minilm (default), minilm:DIR, openai or hash")
    parser.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted run")
    parser.add_argument("--concurrency", type=int, help="tasks at once (default 1)")
    parser.add_argument(
        "--stop",
        choices=tuple(STOP_RULES),
        help="when an episode ends: honest (default; at the first attempt whose visible checks "
        "pass) or oracle (the hidden checks decide whether to try again, as some papers do)",
    )
    parser.add_argument(
        "--carried-reflections",
        type=int,
        help="reflections carried (reflexion; default 3; 0: none)",
    )
    parser.add_argument(
        "--carry",
        choices=CARRY_MODES,
        help="what reflexion gives the next attempt: full (previous answer, visible feedback, "
        "reflections; default) or lessons (reflections only)",
    )
    parser.add_argument(
        "--min-similarity",
        type=similarity,
        help="a stored lesson less similar to the task is not retrieved "
        f"({MIN_SIMILARITY}; solve: 0, as its lessons are the project's own)",
    )
    group = parser.add_argument_group("lesson validity")
    group.add_argument("--validate-after", type=int, help="verified pairs helped in (default 1)")
    group.add_argument("--refute-after", type=int, help="verified pairs hurt in (default 1)")
    group.add_argument("--show-candidates", action="store_true", help="unverified lessons too")
    group.add_argument("--retrieved-cases", type=int, help="cases a case-reading arm sees (1)")
    group.add_argument("--verify-pairs", type=int, help="pairs a lesson is verified on (3)")
    group.add_argument("--lesson-ttl-days", type=float, help="new lessons expire after this")
    add_mcp_flag(parser)
    add_endpoint_flags(parser)
    add_budget_flags(parser)


def add_executor_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--executor", choices=["threads", "ray"], default="threads", help="where episodes run"
    )
    parser.add_argument("--ray-address", help="the Ray cluster (default: a local one)")


# ---------------------------------------------------------------- the commands


def add_attempt(commands: Commands) -> None:
    attempt = commands.add_parser("attempt", help="one question, one attempt")
    attempt.add_argument("question")
    attempt.add_argument("--tools", default="calculator", help="comma-separated tool names")
    attempt.add_argument("--workspace", default=".", help="directory for the file/code tools")
    attempt.add_argument("--yes", action="store_true", help="approve every tool that asks")
    add_network_flag(attempt)
    attempt.add_argument("--json", action="store_true", help="print the Attempt record")
    add_mcp_flag(attempt)
    add_endpoint_flags(attempt)
    add_budget_flags(attempt)
    attempt.set_defaults(handler="mulligan.cli.attempt:cmd_attempt")


def add_run(commands: Commands) -> None:
    run = commands.add_parser("run", help="run a suite or task file, with a strategy")
    add_selection_flags(run)
    run.add_argument("--strategy", default="react", help=", ".join(STRATEGIES))
    run.add_argument("--json", action="store_true", help="one JSON object per task")
    add_run_flags(run, memory_default=DEFAULT_MEMORY)
    add_self_tests_flag(run)
    add_executor_flags(run)
    run.set_defaults(handler="mulligan.cli.run:cmd_run")


def add_solve(commands: Commands) -> None:
    solve = commands.add_parser("solve", help="the loop on your own project, attempts in copies")
    solve.add_argument("task", help='what to do, e.g. "make pytest -q pass"')
    solve.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="CMD",
        help="a command that must exit 0 in the project's root, run in the box (repeatable)",
    )
    solve.add_argument(
        "--dir", default=".", help="the project (default: .); never changed unless --apply"
    )
    solve.add_argument("--apply", action="store_true", help="apply the passing diff to --dir")
    solve.add_argument("--strategy", default="reflexion-memory", help=", ".join(STRATEGIES))
    solve.add_argument("--family", help="lessons are kept under this name (default: dir name)")
    solve.add_argument("--tools", default="", help="more tools by name, comma-separated")
    solve.add_argument("--check-timeout", type=float, default=120.0, help="seconds per check")
    solve.add_argument("--yes", action="store_true", help="approve every tool that asks (shell)")
    add_network_flag(solve)
    add_run_flags(solve, memory_default=DEFAULT_MEMORY)
    solve.set_defaults(handler="mulligan.cli.solve:cmd_solve")


def add_tasks(commands: Commands) -> None:
    tasks = commands.add_parser("tasks", help="list and validate tasks without a model")
    add_selection_flags(tasks)
    tasks.set_defaults(handler="mulligan.cli.run:cmd_tasks")


VERIFY_FLAGS = {"--ids": str, "--data": str, "--limit": int, "--sample": int, "--seed": int,
                "--verify-pairs": int, "--concurrency": int, "--min-similarity": None}  # fmt: skip


def add_memory(commands: Commands) -> None:
    memory = commands.add_parser("memory", help="lessons: list, search, show, retract, ...")
    memory.add_argument(
        "action",
        choices=["list", "search", "show", "retract", "export", "import", "stats", "verify"],
    )
    memory.add_argument("query", nargs="?", help="text, lesson id, file (import), tasks (verify)")
    group = memory.add_argument_group("verify: each candidate paired with and without it")
    for flag, kind in VERIFY_FLAGS.items():
        group.add_argument(flag, type=kind or similarity, default=0 if flag == "--seed" else None)
    add_endpoint_flags(memory)
    add_budget_flags(memory)
    memory.add_argument("--k", type=int, default=5, help="results for search")
    memory.add_argument("--out", help="file for export (default: standard output)")
    memory.add_argument(
        "--trust",
        action="store_true",
        help="import: keep status and counters as exported (default: fresh candidates)",
    )
    memory.add_argument("--memory", help=f"memory directory or chroma URL ({DEFAULT_MEMORY})")
    memory.add_argument(
        "--embedding", help="search, import: embed with this (default: as the store was built)"
    )
    memory.set_defaults(handler="mulligan.cli.memory:cmd_memory")

    episodes = commands.add_parser("episodes", help="episodes: list, show a trajectory")
    episodes.add_argument("action", choices=["list", "show"])
    episodes.add_argument("episode", nargs="?", help="episode id (show)")
    episodes.add_argument("--run", help="only this run's episodes")
    episodes.add_argument("--memory", help=f"memory directory ({DEFAULT_MEMORY})")
    episodes.add_argument("--embedding", help=argparse.SUPPRESS)
    episodes.set_defaults(handler="mulligan.cli.memory:cmd_episodes")


def add_transfer_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("transfer: learn on some tasks, test on others")
    group.add_argument(
        "--learn-on",
        metavar="TRAIN",
        help="first run reflexion-memory over these tasks and keep its lessons, then run the "
        "test tasks with that memory (frozen) and without it: a task file or directory, "
        "comma-separated ids of the suite, or sample:N (seeded by --seed, drawn from the tasks "
        "outside the test selection); overlapping tasks are refused",
    )
    group.add_argument(
        "--keep-learning",
        action="store_true",
        help="the test phase goes on writing lessons (default: the memory is frozen)",
    )
    group.add_argument(
        "--lesson-budget",
        type=count,
        default=LESSON_BUDGET,
        metavar="TOKENS",
        help=f"the curator keeps the most trusted lessons up to this many tokens ({LESSON_BUDGET})",
    )
    group.add_argument(
        "--merge-similarity",
        type=similarity,
        default=MERGE_SIMILARITY,
        help=f"the curator merges lessons at least this similar ({MERGE_SIMILARITY})",
    )


def add_bench(commands: Commands) -> None:
    bench = commands.add_parser("bench", help="strategies side by side, with a report")
    add_selection_flags(bench)
    bench.add_argument(
        "--strategies",
        help=f"of {', '.join(STRATEGIES)} (default: {','.join(DEFAULT_STUDY)}; with --learn-on "
        f"{','.join(TRANSFER_STUDY)})",
    )
    bench.add_argument("--passes", type=int, default=1, help="run the suite again over the memory")
    bench.add_argument("--out", default="mulligan-bench", help="report and memory directory")
    bench.add_argument(
        "--design",
        choices=DESIGNS,
        default="paired",
        help="paired (default): trial 1 made once per task and shared by the strategies that "
        "start without lessons; independent: each strategy makes its own",
    )
    bench.add_argument(
        "--first-from",
        metavar="RUN_ID",
        help="continue from the trial 1s of another run in the same memory (pass its --memory): "
        "two studies paired on the same first attempts",
    )
    add_transfer_flags(bench)
    add_run_flags(bench, memory_default="OUT/memory")
    add_self_tests_flag(bench)
    add_executor_flags(bench)
    bench.set_defaults(handler="mulligan.cli.bench:cmd_bench")

    report = commands.add_parser("report", help="rebuild a bench report from the log")
    report.add_argument("run_id")
    report.add_argument("--out", default="mulligan-bench")
    report.add_argument("--memory", help="the directory holding episodes.db (default OUT/memory)")
    report.set_defaults(handler="mulligan.cli.bench:cmd_report")

    demo = commands.add_parser("demo", help="the study offline, on a scripted model")
    demo.add_argument("--out", default="mulligan-demo")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(handler="mulligan.cli.bench:cmd_demo")


def add_doctor(commands: Commands) -> None:
    doctor = commands.add_parser("doctor", help="check the endpoint, the memory and the sandbox")
    doctor.add_argument("--base-url")
    doctor.add_argument("--api-key")
    doctor.add_argument("--model", help="model name; `local` or `local:PATH.gguf`: llama.cpp")
    doctor.add_argument("--memory", help=f"memory directory or chroma URL ({DEFAULT_MEMORY})")
    doctor.add_argument("--embedding", help="minilm (default), minilm:DIR, openai or hash")
    doctor.set_defaults(handler="mulligan.cli.doctor:cmd_doctor")


def add_data(commands: Commands) -> None:
    parser = commands.add_parser(
        "data",
        help="fetch the published MBPP and HotpotQA files into a cache",
        description=f"files go to {DATA_ENV} or ~/.cache/mulligan/data; "
        "`--data PATH` on run/bench/tasks never downloads",
    )
    parser.add_argument("action", choices=["fetch", "list"])
    parser.add_argument("names", nargs="*", help=f"{', '.join(DATASET_NAMES)} (default: all)")
    parser.set_defaults(handler="mulligan.cli.data:cmd_data")


def add_config(commands: Commands) -> None:
    parser = commands.add_parser(
        "config",
        help="show each setting and where it came from",
        description="Settings come from flags, then MULLIGAN_* variables, then ./mulligan.toml, "
        f"then the per-user file ({user_config_path()}; MULLIGAN_CONFIG names another), "
        "then the defaults.",
    )
    parser.add_argument("action", choices=["show"])
    parser.set_defaults(handler="mulligan.cli.config:cmd_config")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="mulligan", description="Reflexion-style agents: attempt, evaluate, reflect, remember."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for add in (
        add_attempt, add_run, add_solve, add_tasks, add_memory, add_bench,
        add_doctor, add_data, add_config,
    ):  # fmt: skip
        add(commands)
    cli_style.finish(parser)
    return parser
