"""Search/replace edits, as a model writes them, applied to a copy or refused with a reason.

A block names a file, the exact lines to find and the lines to put in their place:

    path/to/file.py
    <<<<<<< SEARCH
    old lines
    =======
    new lines
    >>>>>>> REPLACE

An edit is refused, with what the model needs to write a better one, when its SEARCH lines
are not in the file (the closest lines are named, and which of them differ), when they are
there more than once, when it would change a test, change nothing, or leave a Python file
that does not parse. A refused edit writes nothing, so it costs no check run.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from mulligan.solve.diffs import lines_of
from mulligan.solve.localise import DOCSTRING_MARKED, is_test_file
from mulligan.solve.trace import COPIED_VALUES

BLOCK = re.compile(
    r"^[ \t]*<{5,9}[ \t]*SEARCH[^\n]*\n(?P<search>.*?)^[ \t]*={5,9}[ \t]*\n"
    r"(?P<replace>.*?)^[ \t]*>{5,9}[ \t]*REPLACE[^\n]*$",
    re.MULTILINE | re.DOTALL,
)
LOOSE_BLOCK = re.compile(
    r"^[ \t]*<{5,9}[ \t]*SEARCH[^\n]*\n(?P<search>.*?)^[ \t]*(?:={5,9}|>{5,9}[ \t]*REPLACE)"
    r"[^\n]*\n(?P<replace>.*?)(?=^[ \t]*<{5,9}[ \t]*SEARCH|\Z)",
    re.MULTILINE | re.DOTALL,
)
"""A block whose markers a small model wrote out of order: `>>>>>>> REPLACE` as the divider,
the divider after it, or no end marker (read only when no block is in order)."""
MARKER = re.compile(r"^[ \t]*(?:={5,9}|>{5,9}[ \t]*REPLACE[^\n]*)[ \t]*$\n?", re.MULTILINE)
NUMBERED = re.compile(r"^\s*\d+\s*>?\s*\| ?")
"""The line numbers the model was shown the code with (`12 | code`), copied back."""
PATH = re.compile(r"([\w./-]+\.\w+)")


class Refused(Exception):
    """An edit that cannot be applied, and why (`str(exc)`, shown to the model)."""


@dataclass(frozen=True)
class Block:
    path: str | None
    search: str
    replace: str


def parse_blocks(reply: str) -> list[Block]:
    """Every search/replace block in the reply, each with the path written above it."""
    blocks = []
    matches = list(BLOCK.finditer(reply))
    loose = not matches
    for match in matches or LOOSE_BLOCK.finditer(reply):
        above = reversed(reply[: match.start()].rstrip().splitlines()[-3:])
        named = [PATH.findall(x.strip().strip("`*:")) for x in above if x.strip()[:3] != "```"]
        path = next((found[-1] for found in named if found), None)
        path = path.lstrip("./") if path and path.startswith("./") else path
        replace = match.group("replace")
        replace = MARKER.sub("", replace) if loose else replace  # a loose block's other markers
        blocks.append(Block(path, match.group("search"), replace))
    return blocks


def _unnumbered(text: str) -> list[str]:
    """The block's lines, each ending in a newline, without the line numbers it was shown with
    (when every line has one) and the values that follow a line copied from the trace."""
    lines = [COPIED_VALUES.sub("", x) for x in lines_of(text)]
    filled = [x for x in lines if x.strip()]
    if filled and all(NUMBERED.match(x) for x in filled):
        lines = [NUMBERED.sub("", x, count=1) for x in lines]
    return [x if x.endswith("\n") else x + "\n" for x in lines]


def _exact(line: str) -> str:
    return line.rstrip("\n")


def _where(file_lines: list[str], search: list[str], key: Callable[[str], str]) -> list[int]:
    """Where the search lines start in the file, lines compared by `key`."""
    wanted, have = [key(x) for x in search], [key(x) for x in file_lines]
    return [i for i in range(len(have) - len(wanted) + 1) if have[i : i + len(wanted)] == wanted]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def replace_once(path: str, text: str, block: Block, near: Collection[int] = ()) -> str:
    """The file's text with the block applied; Refused if it does not match exactly once
    (where it matches several times, once among the lines `near`, the ones shown, will do)."""
    lines = lines_of(text)
    written = _unnumbered(block.search)
    search = _unmarked(written, lines)
    replace = _unnumbered(block.replace)
    if not any(x.strip() for x in search):
        raise Refused(f"{path}: the SEARCH part is empty; copy the exact lines to change into it")
    found = _where(lines, search, _exact)
    loose = not found
    if loose:  # the same lines indented differently: re-indent the replacement
        found = _where(lines, search, str.strip)
    if len(found) > 1 and near:
        found = [i for i in found if i + 1 in near] or found
    if loose and len(found) == 1:
        first = next(k for k, x in enumerate(search) if x.strip())
        have, wrote = _indent(lines[found[0] + first]), _indent(search[first])
        replace = [
            have + x[len(wrote) :] if x.strip() and x.startswith(wrote) else x for x in replace
        ]
    if not found and (plain := _unwrapped(block)) is not None:
        return replace_once(path, text, plain, near)
    if not found:
        within = _within_a_line(lines, search, replace, near)
        if within is not None:
            return within
        raise Refused(_no_match(path, lines, search))
    if len(found) > 1:
        places = ", ".join(str(i + 1) for i in found[:5])
        raise Refused(
            f"{path}: the SEARCH lines occur {len(found)} times (at lines {places}); "
            "include more lines around the change so that they occur once"
        )
    start = found[0]
    marks = {x.strip() for x in written if DOCSTRING_MARKED.match(x)}
    replace = _unmarked(replace, lines, marks)
    if all(x.endswith("\r\n") for x in lines[start : start + len(search)]):  # the file's ends
        replace = [x[:-1] + "\r\n" if x[-2:-1] != "\r" and x.endswith("\n") else x for x in replace]
    return "".join(lines[:start] + replace + lines[start + len(search) :])


def _unmarked(
    block_lines: list[str], file_lines: list[str], marks: Collection[str] | None = None
) -> list[str]:
    """The block's lines with the mark that shown code stands in for a docstring's lines with
    (`... (docstring, lines 3-4)`) put back as those lines of the file (`marks`: only these)."""
    lines: list[str] = []
    for line in block_lines:
        mark = DOCSTRING_MARKED.match(line) if marks is None or line.strip() in marks else None
        first, last = (int(mark[1]), int(mark[2])) if mark else (0, 0)
        lines += file_lines[first - 1 : last] if 1 <= first <= last <= len(file_lines) else [line]
    return lines


def _unwrapped(block: Block) -> Block | None:
    """The block without the parentheses or quotes round each of its lines (`(return x + 1)`,
    `'return x + 1'`), as a small model writes them after a form with placeholders in
    parentheses or a refusal that quotes the file's lines; None if a line has none."""
    parts = []
    for text in (block.search, block.replace):
        inside = [_inside(x) if x.strip() else x for x in lines_of(text)]
        if None in inside:
            return None
        parts.append("".join(x for x in inside if x))
    return Block(block.path, parts[0], parts[1]) if block.search.strip() else None


WRAPPERS = {"(": ")", "'": "'", '"': '"'}


def _inside(line: str) -> str | None:
    """The line without the parentheses or quotes round it; None when it has none."""
    start, end = len(line) - len(line.lstrip()), len(line.rstrip()) - 1
    if end <= start or WRAPPERS.get(line[start]) != line[end]:
        return None
    return line[:start] + line[start + 1 : end] + line[end + 1 :]


def _within_a_line(
    lines: list[str], search: list[str], replace: list[str], near: Collection[int]
) -> str | None:
    """A one-line SEARCH that is part of exactly one line of the file, or of the lines `near`
    (`x + 1` of `    return x + 1`), replaced there by a one-line REPLACE; None otherwise."""
    wanted = [x.strip() for x in search if x.strip()]
    new = [x.strip() for x in replace if x.strip()]
    if len(wanted) != 1 or len(new) != 1:
        return None
    holding = [i for i, line in enumerate(lines) if wanted[0] in line]
    if len(holding) > 1:
        holding = [i for i in holding if i + 1 in near]
    if len(holding) != 1 or lines[holding[0]].count(wanted[0]) != 1:
        return None
    at = holding[0]
    return "".join(lines[:at] + [lines[at].replace(wanted[0], new[0])] + lines[at + 1 :])


def _no_match(path: str, lines: list[str], search: list[str]) -> str:
    """Which lines of the file come closest to the SEARCH lines, and how they differ."""
    size = len(search)
    wanted = "".join(search)
    best, best_ratio = 0, -1.0
    for i in range(max(len(lines) - size + 1, 1)):
        ratio = difflib.SequenceMatcher(None, wanted, "".join(lines[i : i + size])).ratio()
        if ratio > best_ratio:
            best, best_ratio = i, ratio
    closest = lines[best : best + size]
    differing = [
        f"  SEARCH line {k + 1}: {search[k].rstrip()!r}\n"
        f"  file line {best + k + 1}:   {closest[k].rstrip() if k < len(closest) else ''!r}"
        for k in range(size)
        if k >= len(closest) or _exact(search[k]) != _exact(closest[k])
    ]
    return (
        f"{path}: the SEARCH lines are not in the file. The closest are lines {best + 1}-"
        f"{best + len(closest)}; these differ:\n" + "\n".join(differing[:6]) + "\n"
        "Copy the lines exactly as the file has them (without the line numbers)."
    )


def syntax_problem(path: str, text: str) -> str | None:
    """Why a Python file does not parse, naming the line; None if it parses (or is not .py)."""
    if not path.endswith(".py"):
        return None
    try:
        ast.parse(text)
    except SyntaxError as exc:
        line = (text.splitlines()[exc.lineno - 1] if exc.lineno else "").rstrip()
        where = f"line {exc.lineno}: {exc.msg}: {line!r}"
        return f"{path}: after the edit the file does not parse: {where}"
    except ValueError as exc:  # a null byte
        return f"{path}: after the edit the file does not parse: {exc}"
    except (RecursionError, MemoryError):
        return f"{path}: after the edit the file does not parse: it is nested too deeply"
    return None


@dataclass
class Plan:
    texts: dict[str, str]
    """path -> new text, for every file the applied blocks change."""
    skipped: list[str]
    """Why each block that was not applied was refused (the others were)."""


def planned(
    blocks: list[Block], read: Callable[[str], str | None], shown: Mapping[str, Collection[int]]
) -> Plan:
    """What the blocks change. A block that does not apply (no match, a test) is skipped with
    its reason; Refused, naming why, when none applies, when the result does not parse, or
    when it changes nothing. `read` gives a project file's text (None: not a file of it);
    `shown`: the files the model was shown and their lines shown, where a block without a
    usable path is looked for, and where one that matches several places is applied.
    """
    if not blocks:
        raise Refused(
            "no SEARCH/REPLACE block was found in the reply; answer with the file's path, then "
            "<<<<<<< SEARCH, the exact lines to change, =======, the new lines, >>>>>>> REPLACE"
        )
    texts: dict[str, str] = {}
    skipped: list[str] = []
    for block in blocks:
        try:
            path = _path_for(block, read, shown, texts)
            if is_test_file(path):
                raise Refused(f"{path} is a test: fix the project's code, do not edit the tests")
            texts[path] = replace_once(path, texts[path], block, shown.get(path, ()))
        except Refused as exc:
            skipped.append(str(exc))
    if len(skipped) == len(blocks):
        raise Refused("\n".join(skipped))
    for path, text in texts.items():
        problem = syntax_problem(path, text)
        if problem:
            raise Refused(problem)
    changed = {p: t for p, t in texts.items() if t != read(p)}
    if not changed:
        raise Refused(
            "the edit changes nothing: the REPLACE lines must differ from the SEARCH lines"
        )
    return Plan(changed, skipped)


def _path_for(
    block: Block,
    read: Callable[[str], str | None],
    shown: Mapping[str, Collection[int]],
    texts: dict[str, str],
) -> str:
    """The block's own path when the project has it (and its lines, if a shown file has them);
    else the one shown file its lines are in."""
    if block.path and block.path not in texts and read(block.path) is not None:
        texts[block.path] = read(block.path) or ""
    search = [x.strip() for x in _unnumbered(block.search) if x.strip()]
    holding = []
    for path in dict.fromkeys(shown):
        text = texts.get(path) if path in texts else read(path)
        if text is not None and search and _where(lines_of(text), search, str.strip):
            holding.append((path, text))
    if block.path and block.path in texts and (len(holding) != 1 or block.path == holding[0][0]):
        return block.path
    if len(holding) == 1 or (holding and len(shown) == 1):
        path, text = holding[0]
        texts.setdefault(path, text)
        return path
    named = (
        f"{block.path} is not a file of the project" if block.path else "the block names no file"
    )
    raise Refused(f"{named}; write the path shown above the code (one of: {', '.join(shown)})")
