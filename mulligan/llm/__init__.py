"""Chat models: the protocol, the OpenAI-compatible client, usage and cost."""

from mulligan.llm.base import ChatModel, ChatResponse, Message
from mulligan.llm.pricing import cost_of, set_price

__all__ = ["ChatModel", "ChatResponse", "Message", "cost_of", "set_price"]
