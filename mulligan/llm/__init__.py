"""Chat models: the protocol, the OpenAI-compatible client, usage and cost."""
