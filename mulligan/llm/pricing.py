"""Cost from token usage and a price table the user can extend."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    prompt: float
    completion: float


PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "o4-mini": Price(1.10, 4.40),
    "gpt-3.5-turbo": Price(0.50, 1.50),
}
"""Known list prices. Unknown models (local servers) cost 0; add yours with `set_price`."""


def set_price(model: str, prompt_per_million: float, completion_per_million: float) -> None:
    PRICES[model] = Price(prompt_per_million, completion_per_million)


def price_for(model: str) -> Price | None:
    if model in PRICES:
        return PRICES[model]
    # dated snapshots such as gpt-4o-mini-2024-07-18 take their family's price
    matches = [name for name in PRICES if model.startswith(name + "-")]
    return PRICES[max(matches, key=len)] if matches else None


def cost_of(model: str, prompt_tokens: int, completion_tokens: int) -> float:
    price = price_for(model)
    if price is None:
        return 0.0
    return (prompt_tokens * price.prompt + completion_tokens * price.completion) / 1_000_000
