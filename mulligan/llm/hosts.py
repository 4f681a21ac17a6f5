"""Where an endpoint runs: on the user's own machine or network, or hosted."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlparse


def self_hosted(base_url: str | None) -> bool:
    """On a loopback, private or link-local address, or a `.local` name: llama.cpp, Ollama,
    LM Studio, vLLM... run by the user, as against a hosted API."""
    host = urlparse(base_url or "").hostname or ""
    if host == "localhost" or host.endswith((".local", ".localhost")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


HOSTED_STOPS = 4
"""OpenAI's API refuses more stop sequences than this; self-hosted servers take more."""


def stops_for(base_url: str, stop: list[str]) -> list[str]:
    """The stops to send: all of them to a self-hosted server, the first four to any other."""
    return list(stop) if self_hosted(base_url) else list(stop[:HOSTED_STOPS])
