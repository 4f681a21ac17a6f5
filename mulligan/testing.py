"""The test doubles, under the names tests and users import: the scripted model
(mulligan/llm/scripted.py) and the fake OpenAI-compatible server (mulligan/llm/fake_server.py)
live next to the real adapter in `llm/`."""

from mulligan.llm.fake_server import FakeOpenAIServer, FakeReply, orphan_problems
from mulligan.llm.scripted import ReceivedCall, ScriptedModel, UnexpectedCall, reply, tool_call

__all__ = [
    "FakeOpenAIServer",
    "FakeReply",
    "ReceivedCall",
    "ScriptedModel",
    "UnexpectedCall",
    "orphan_problems",
    "reply",
    "tool_call",
]
