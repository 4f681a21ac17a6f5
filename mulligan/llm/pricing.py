"""Cost from token usage: the built-in list prices, the user's prices, or unknown.

Where a price comes from, first match wins:
  1. `--price-in` / `--price-out` (the run's model), US dollars per million tokens;
  2. the file named by `MULLIGAN_PRICES` (JSON: {"model": {"input": X, "output": Y}});
  3. `[prices]` in mulligan.toml (the same shape, as a TOML table);
  4. the built-in table of OpenAI list prices below (dated snapshots take their family's);
  5. otherwise the price is unknown and so is every cost: shown as unknown, never as $0.
A local server is not assumed free: price it at 0 yourself if that is what you mean.
Nothing is fetched over the network.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Final, Literal

from mulligan.errors import UserError
from mulligan.schema import Task


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
"""OpenAI list prices as of 2025-06. Other models have no price until the user gives one."""


class Unset(Enum):
    """No price was passed: look the model up in the tables."""

    token = 0


UNSET: Final[Literal[Unset.token]] = Unset.token


def price_for(model: str, table: dict[str, Price] | None = None) -> Price | None:
    """The model's price in `table` (the built-in one by default), or None."""
    prices = PRICES if table is None else table
    if model in prices:
        return prices[model]
    # dated snapshots such as gpt-4o-mini-2024-07-18 take their family's price
    matches = [name for name in prices if model.startswith(name + "-")]
    return prices[max(matches, key=len)] if matches else None


def cost_of(price: Price | None, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Dollars for the tokens, or None when the price is unknown."""
    if price is None:
        return None
    return (prompt_tokens * price.prompt + completion_tokens * price.completion) / 1_000_000


def parse_prices(data: Any, where: str) -> dict[str, Price]:
    """{"model": {"input": X, "output": Y}} with X, Y >= 0 dollars per million tokens."""
    if not isinstance(data, dict):
        raise UserError(f"{where}: prices must map model names to {{input = X, output = Y}}")
    prices = {}
    for model, entry in data.items():
        keys = set(entry) if isinstance(entry, dict) else set()
        values = [entry[k] for k in ("input", "output")] if keys == {"input", "output"} else []
        numbers = [float(v) for v in values if type(v) in (int, float)]  # not bool
        if len(numbers) != 2 or min(numbers) < 0:
            raise UserError(
                f"{where}: price of {model!r} must be {{input = X, output = Y}}, "
                "US dollars per million tokens, X and Y >= 0"
            )
        prices[str(model)] = Price(numbers[0], numbers[1])
    return prices


def read_prices_file(path: str) -> dict[str, Price]:
    """The `MULLIGAN_PRICES` file: a JSON object of model -> {input, output}."""
    try:
        data = json.loads(Path(path).expanduser().read_text())
    except OSError as exc:
        raise UserError(f"MULLIGAN_PRICES={path}: cannot read it ({exc.strerror})") from exc
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise UserError(f"MULLIGAN_PRICES={path}: not JSON ({exc})") from exc
    return parse_prices(data, f"MULLIGAN_PRICES={path}")


def resolve_price(
    model: str,
    price_in: float | None,
    price_out: float | None,
    configured: dict[str, Price],
) -> Price | None:
    """The model's price from the flags, then the user's configured prices, then the table."""
    if (price_in is None) != (price_out is None):
        raise UserError("--price-in and --price-out go together: pass both (dollars per 1M tokens)")
    if price_in is not None and price_out is not None:
        if price_in < 0 or price_out < 0:
            raise UserError("--price-in and --price-out must be >= 0 (dollars per 1M tokens)")
        return Price(price_in, price_out)
    return price_for(model, configured) or price_for(model)


def require_price_for_cost_budget(
    model: str, price: Price | None, flag_given: bool, tasks: list[Task]
) -> None:
    """A cost budget (`--max-cost`, or a task's budget.max_cost) needs a price: refused up
    front, before any work, when the model's price is unknown."""
    if price is not None:
        return
    budgeted = [t.id for t in tasks if t.budget and t.budget.max_cost is not None]
    where = ["--max-cost"] if flag_given else [f"task {i!r}: budget.max_cost" for i in budgeted]
    if where:
        raise UserError(
            f"{where[0]} needs a price for model {model!r}, which mulligan does not know: pass "
            "--price-in X --price-out Y (US dollars per million tokens), or add it under "
            "[prices] in mulligan.toml or to the MULLIGAN_PRICES file"
        )
