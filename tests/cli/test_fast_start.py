"""`--help` of every command loads none of the heavy libraries (chromadb, openai, numpy, ...):
only argparse and pydantic, whose fields the settings' flags are derived from."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

HEAVY = (
    "chromadb", "openai", "onnxruntime", "matplotlib", "numpy", "sqlite_utils", "rich",
)  # fmt: skip

PROBE = """
import contextlib, io, json, sys
from mulligan import cli
parser = cli.build_parser()
commands = [a for a in parser._subparsers._group_actions[0].choices]
helps = [["--help"]] + [[c, "--help"] for c in commands]
helps += [["memory", "list", "--help"], ["episodes", "show", "--help"]]
for argv in helps:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        cli.main(argv)
loaded = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:]))
print(json.dumps({"commands": commands, "loaded": loaded}))
"""


def test_help_of_every_command_imports_no_heavy_library() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *HEAVY], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert {"run", "bench", "memory", "attempt", "solve", "doctor"} <= set(result["commands"])
    assert result["loaded"] == []


def test_help_lists_the_strategies_without_loading_them_or_logging() -> None:
    """The strategies' names come from the generated flag table: `--help` loads neither the
    registry's strategy objects (dataclasses, and inspect behind them) nor logging."""
    code = "import contextlib, io, sys\nfrom mulligan import cli\n"
    code += (
        "with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):\n"
    )
    code += "    cli.main(['bench', '--help'])\n"
    code += "print(sorted({'mulligan.strategies', 'logging'} & set(sys.modules)), 'reflexion-memory' in out.getvalue())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["[]", "True"], done.stderr


def test_the_probe_would_see_a_heavy_import() -> None:
    """The check above is not vacuous: a command that does work loads chromadb."""
    code = "import sys; from mulligan.memory import Memory, HashEmbedding; import tempfile\n"
    code += "Memory(tempfile.mkdtemp(), HashEmbedding()).store\n"
    code += "print('chromadb' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr


def test_every_command_names_a_handler_that_exists() -> None:
    """Handlers are named as "module:function" so parsing imports nothing; each must resolve."""
    from mulligan.cli.help_format import commands_of
    from mulligan.cli.parser import build_parser, handler_of

    parser = build_parser()
    commands = commands_of(parser)
    assert len(commands) >= 12
    for name, command in commands.items():
        handler = command.get_default("handler")
        assert isinstance(handler, str) and ":" in handler, name
        assert callable(handler_of(argparse.Namespace(handler=handler))), name


def test_light_defaults_agree_with_the_modules_that_use_them() -> None:
    from mulligan import data, defaults

    assert tuple(data.DATASETS) == defaults.DATASET_NAMES
