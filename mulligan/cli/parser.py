"""Every command's flags, and nothing else: a setting's flag is derived from its field in the
run configuration (cli/setting_flags.py). Building the parser imports only argparse,
pydantic and the light modules that define settings, so `--help` starts fast. A command's
handler is named as "module:function" and imported only when that command runs
(`handler_of`)."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import NoReturn

from mulligan.cli import help_format
from mulligan.cli.setting_flags import FLAGS, add_command_flag, add_setting_flags
from mulligan.defaults import DATA_ENV, DATASET_NAMES, DEFAULT_MEMORY, DESIGNS, user_config_path

STRATEGIES, DEFAULT_STUDY, TRANSFER_STUDY = (
    FLAGS["strategies"][key] for key in ("names", "default_study", "transfer_study")
)  # from the generated table: the registry's strategy objects load only when a command runs

Handler = Callable[[argparse.Namespace], int]
Commands = argparse._SubParsersAction  # type: ignore[type-arg]


class Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (exit 2) instead of the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


HANDLED_IN = {"tasks": "run", "episodes": "memory", "report": "bench", "demo": "bench"}
"""The module of a command's handler, `cmd_<command>`, where it is not named after the command."""


def handler_of(args: argparse.Namespace) -> Handler:
    """The function that runs the parsed command, imported now."""
    module, _, name = str(args.handler).partition(":")
    function: Handler = getattr(importlib.import_module(module), name)
    return function


# ---------------------------------------------------------------- shared flag groups


def add_network_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--network", action="store_true", help="let the box reach the network (default: none)"
    )


def add_selection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", help="humaneval, mbpp, hotpotqa, examples, or a task file/dir")
    parser.add_argument("--data", help="the dataset file for mbpp or hotpotqa")
    parser.add_argument(
        "--feedback",
        choices=["em", "hidden"],
        help="hotpotqa only: the answer check as feedback (em, the default) or hidden",
    )
    add_command_flag(parser, "limit")
    parser.add_argument("--ids", help="comma-separated task ids")
    add_command_flag(parser, "sample")
    add_command_flag(parser, "seed")
    add_network_flag(parser)


def add_run_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """What `run`, `bench` and `solve` share: resume, and every setting's flag."""
    parser.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted run")
    add_setting_flags(parser, command)


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
    add_setting_flags(attempt, "attempt")


def add_run(commands: Commands) -> None:
    run = commands.add_parser("run", help="run a suite or task file, with a strategy")
    add_selection_flags(run)
    run.add_argument("--strategy", default="react", help=", ".join(STRATEGIES))
    run.add_argument("--json", action="store_true", help="one JSON object per task")
    run.add_argument(
        "--draws-from",
        metavar="MEMORY",
        help="a paired study's memory arm: attempts made from the bare prompt reuse those "
        "another run (the baseline's, alone in MEMORY) made at the same trial",
    )
    add_run_flags(run, "run")
    add_executor_flags(run)


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
    solve.add_argument(
        "--strategy",
        default="auto",
        help="auto (default: patch, the repair pipeline, when the failing checks name failing "
        "tests or a traceback into the project; else reflexion-memory, the agent loop), "
        + ", ".join(STRATEGIES),
    )
    solve.add_argument("--family", help="lessons are kept under this name (default: dir name)")
    solve.add_argument("--tools", default="", help="more tools by name, comma-separated")
    add_command_flag(solve, "check_timeout")
    solve.add_argument("--yes", action="store_true", help="approve every tool that asks (shell)")
    add_network_flag(solve)
    add_run_flags(solve, "solve")


def add_tasks(commands: Commands) -> None:
    tasks = commands.add_parser("tasks", help="list and validate tasks without a model")
    add_selection_flags(tasks)


def add_memory(commands: Commands) -> None:
    memory = commands.add_parser("memory", help="lessons: list, search, show, retract, ...")
    memory.add_argument(
        "action",
        choices=[
            "list",
            "search",
            "show",
            "retract",
            "export",
            "import",
            "stats",
            "verify",
            "mcp",
            "upgrade",
        ],
        help="mcp: serve the memory to other agents over MCP on stdio (tools recall, report); "
        "upgrade: bring an older mulligan's episode log up to date, changing nothing else",
    )
    memory.add_argument("query", nargs="?", help="text, lesson id, file (import), tasks (verify)")
    add_command_flag(memory, "k")
    verifying = memory.add_argument_group("verify: each candidate paired with and without it")
    verifying.add_argument("--ids", help="comma-separated task ids")
    verifying.add_argument("--data", help="the dataset file for mbpp or hotpotqa")
    for name in ("limit", "sample", "seed"):
        add_command_flag(verifying, name)
    verifying.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted verify")
    add_setting_flags(memory, "memory")
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
    memory.add_argument(
        "--family", help="mcp: the tasks' family when a call names none (default: custom)"
    )

    episodes = commands.add_parser("episodes", help="episodes: list, show a trajectory")
    episodes.add_argument("action", choices=["list", "show"])
    episodes.add_argument("episode", nargs="?", help="episode id (show)")
    episodes.add_argument("--run", help="only this run's episodes")
    episodes.add_argument("--memory", help=f"memory directory ({DEFAULT_MEMORY})")
    episodes.add_argument("--embedding", help=argparse.SUPPRESS)


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
    add_command_flag(group, "lesson_budget", metavar="TOKENS")
    add_command_flag(group, "merge_similarity")


def add_bench(commands: Commands) -> None:
    bench = commands.add_parser("bench", help="strategies side by side, with a report")
    add_selection_flags(bench)
    bench.add_argument(
        "--strategies",
        help=f"of {', '.join(STRATEGIES)}, each with its options in brackets, e.g. "
        f"memory-frozen[cases,shuffled] (default: {','.join(DEFAULT_STUDY)}; with --learn-on "
        f"{','.join(TRANSFER_STUDY)})",
    )
    add_command_flag(bench, "passes")
    add_command_flag(bench, "repeats", metavar="K")
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
    add_run_flags(bench, "bench")
    add_executor_flags(bench)

    report = commands.add_parser("report", help="rebuild a bench report from the log")
    report.add_argument("run_id")
    report.add_argument("--out", default="mulligan-bench")
    report.add_argument("--memory", help="the directory holding episodes.db (default OUT/memory)")

    demo = commands.add_parser("demo", help="the study offline, on a scripted model")
    demo.add_argument("--out", default="mulligan-demo")
    add_command_flag(demo, "seed")


def add_doctor(commands: Commands) -> None:
    doctor = commands.add_parser("doctor", help="check the endpoint, the memory and the sandbox")
    add_setting_flags(doctor, "doctor")


def add_data(commands: Commands) -> None:
    parser = commands.add_parser(
        "data",
        help="fetch the published MBPP and HotpotQA files into a cache",
        description=f"files go to {DATA_ENV} or ~/.cache/mulligan/data; "
        "`--data PATH` on run/bench/tasks never downloads",
    )
    parser.add_argument("action", choices=["fetch", "list"])
    parser.add_argument("names", nargs="*", help=f"{', '.join(DATASET_NAMES)} (default: all)")


def add_config(commands: Commands) -> None:
    parser = commands.add_parser(
        "config",
        help="show each setting and where it came from",
        description="Settings come from flags, then MULLIGAN_* variables, then ./mulligan.toml, "
        f"then the per-user file ({user_config_path()}; MULLIGAN_CONFIG names another), "
        "then the defaults.",
    )
    parser.add_argument(
        "action",
        choices=["show", "reference"],
        help="show: each setting's value and source; reference: every setting, as Markdown",
    )


def add_view(commands: Commands) -> None:
    view = commands.add_parser("view", help="the episode log in a browser (read-only)")
    view.add_argument("run_id", nargs="?", metavar="RUN_ID", help="open this run's task grid")
    view.add_argument("--memory", help=f"memory directory ({DEFAULT_MEMORY})")
    add_command_flag(view, "port")
    view.add_argument("--no-open", action="store_true", help="print the URL, open no browser")
    view.add_argument("--bundle", metavar="DIR", help="write RUN_ID's pages as files, no server")


def add_serve(commands: Commands) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the local model's server for other processes until Ctrl-C",
        description="llama.cpp's server on 127.0.0.1, as --model local starts it, kept for "
        "other processes to share (OPENAI_BASE_URL); it prints the base URL",
    )
    add_command_flag(serve, "port")
    add_setting_flags(serve, "serve")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="mulligan", description="Reflexion-style agents: attempt, evaluate, reflect, remember."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for add in (
        add_attempt, add_run, add_solve, add_tasks, add_memory, add_bench,
        add_doctor, add_data, add_config, add_view, add_serve,
    ):  # fmt: skip
        add(commands)
    for name, command in help_format.commands_of(parser).items():
        command.set_defaults(handler=f"mulligan.cli.{HANDLED_IN.get(name, name)}:cmd_{name}")
    help_format.finish(parser)
    return parser
