"""Build the chat model that the settings describe."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mulligan.config import NO_ENDPOINT, Settings, endpoint_configured
from mulligan.errors import ModelError, UserError
from mulligan.llm.pricing import parse_prices, read_prices_file, resolve_price

if TYPE_CHECKING:
    from mulligan.llm.openai_client import OpenAIChatModel  # openai loads on connect()


def connect(settings: Settings, *, default_temperature: float = 0.0) -> OpenAIChatModel:
    """The endpoint's chat model; without a model name, the one a local server serves."""
    from mulligan.llm.openai_client import OpenAIChatModel

    if not endpoint_configured(settings):
        raise UserError(NO_ENDPOINT)
    temperature = settings.temperature
    model = OpenAIChatModel(
        settings.model or "unset",
        base_url=settings.base_url,
        api_key=settings.api_key,
        temperature=default_temperature if temperature is None else temperature,
        timeout=settings.timeout,
    )
    configured = parse_prices(settings.prices, "[prices] in mulligan.toml")
    if settings.prices_file:
        configured |= read_prices_file(settings.prices_file)
    if settings.model:
        model.price = resolve_price(model.name, settings.price_in, settings.price_out, configured)
        return model
    if not settings.base_url:
        raise UserError("no model name: pass --model NAME or set MULLIGAN_MODEL")
    try:
        served = model.list_models()
    except ModelError as exc:
        raise UserError(
            f"endpoint {settings.base_url} cannot be reached ({exc}); is the server running?"
        ) from exc
    if not served:
        raise UserError(f"{settings.base_url} serves no models; pass --model NAME")
    model.name = served[0]
    model.price = resolve_price(model.name, settings.price_in, settings.price_out, configured)
    return model
