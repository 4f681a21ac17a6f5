"""Text from outside cannot pose as a turn of the conversation.

A chat server renders the messages through the model's template and tokenizes the result
with special tokens on, so `<|im_start|>system` in a tool's output, a file, a lesson or a
task would open a real system turn (ChatML/Qwen; likewise Llama 3's `<|start_header_id|>`
and `<|eot_id|>`, Mistral's `[INST]`, `<s>`, Gemma's `<start_of_turn>`, DeepSeek's
`<｜...｜>`), and `</tool_response>` would close the tool-result wrapper of Hermes-style
templates. `neutralise` puts a WORD JOINER (U+2060) right after the marker's first
character: the tokenizer matches special tokens on the exact text, so it now sees ordinary
characters, while a human reads the same text (the joiner is invisible and zero-width).

Why U+2060: it is a format character (not whitespace to `str.strip`, `split` or regex `\\s`,
so the text's shape is kept), it adds no line-break opportunity (U+200B ZERO WIDTH SPACE
does), and it has no joining meaning (U+200D ZERO WIDTH JOINER combines emoji). A visible
look-alike (`｜` for `|`) would change what a human reads.

Only markers are touched: `a < b | c`, `x[i]` and `<b>` pass unchanged. The function is
idempotent. Logs keep the raw text; neutralise where text enters a prompt.

`encodable` is for text as it comes in (a model's reply, a tool's output): a lone surrogate
can be neither sent nor logged as UTF-8.
"""

from __future__ import annotations

import re
from typing import Any

JOINER = "\u2060"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

_MARKERS = re.compile(
    r"<(?=\|[^\s|<>]{1,64}\|>)"  # <|im_start|>, <|eot_id|>, <|endoftext|>, every <|...|>
    r"|<(?=｜[^\s｜<>]{1,64}｜>)"  # DeepSeek's full-width <｜begin▁of▁sentence｜>
    r"|<(?=/?(?:s|bos|eos|start_of_turn|end_of_turn|tool_call|tool_response)>)"
    r"|<(?=</?SYS>>)"  # Llama 2's <<SYS>> and <</SYS>>
    r"|\[(?=/?(?:INST|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS|TOOL_CONTENT)\])"
)


def neutralise(text: str) -> str:
    """`text` with every chat-template control marker broken by an invisible joiner."""
    if "<" not in text and "[" not in text:
        return text
    return _MARKERS.sub(lambda match: match.group(0) + JOINER, text)


def neutralise_all(value: Any) -> Any:
    """Every string in `value` (nested lists, tuples and dicts, keys too) neutralised."""
    if isinstance(value, str):
        return neutralise(value)
    if isinstance(value, dict):
        return {neutralise_all(k): neutralise_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(neutralise_all(v) for v in value)
    return value


def encodable(text: str) -> str:
    """`text` with every lone surrogate (a JSON `\\ud800` escape a model wrote, a file name
    `os.fsdecode` kept as bytes) made U+FFFD, the replacement character."""
    return _LONE_SURROGATE.sub("\ufffd", text)
