"""structlog configuration and the per-event context every log line carries.

JSON lines when stderr is not a terminal (what log collectors read), coloured console lines
otherwise. Standard-library loggers (nats-py, aiohttp, faststream) go through the same
renderer. Handlers call :func:`bind_event` at their start so every line they log names the
event and the object it is about. Every rendered line passes through
:func:`~kaiwo_runtime.redaction.redact_secrets`: a URL's password or an NKey seed never
reaches the output, whoever logged it (our code, nats-py, an exception's message).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

import structlog
from kaiwo_contracts.events.envelope import Envelope
from structlog.typing import Processor

from kaiwo_runtime.redaction import redact_secrets

_SHARED: list[Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_logger_name,
    structlog.stdlib.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
    structlog.processors.StackInfoRenderer(),
]


class LevelCheckedLogger(structlog.stdlib.BoundLogger):
    """A bound logger whose ``debug`` and ``info`` return at once when the first processor,
    :func:`structlog.stdlib.filter_by_level`, would drop the line anyway: they are the lines
    logged once per message, and building the event to drop it cost as much again. When
    another chain is in place (``structlog.testing.capture_logs``), every line goes to it."""

    def debug(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        if self._dropped_below(logging.DEBUG):
            return None
        return super().debug(event, *args, **kw)

    def info(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        if self._dropped_below(logging.INFO):
            return None
        return super().info(event, *args, **kw)

    def _dropped_below(self, level: int) -> bool:
        first = next(iter(self._processors), None)
        return first is structlog.stdlib.filter_by_level and (
            self._logger.disabled or level < self._logger.getEffectiveLevel()
        )


def configure_logging(
    *, level: str = "INFO", json: bool | None = None, stream: TextIO | None = None
) -> None:
    """Configure structlog and the standard library once, at process start.

    ``json`` None: JSON unless ``stream`` (stderr by default) is a terminal.
    """
    output = stream or sys.stderr
    use_json = (not output.isatty()) if json is None else json
    renderer: Processor = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=output.isatty())
    )
    final: list[Processor] = [
        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
        *([structlog.processors.dict_tracebacks] if use_json else []),
        renderer,
        _redacted,
    ]
    formatter = structlog.stdlib.ProcessorFormatter(foreign_pre_chain=_SHARED, processors=final)
    handler = logging.StreamHandler(output)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    structlog.configure(
        # Below the level, a line is dropped before the chain runs: a debug line at INFO
        # cost as much as a line written (~19 us, once per message in the watcher).
        processors=[
            structlog.stdlib.filter_by_level,
            *_SHARED,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=LevelCheckedLogger,
        cache_logger_on_first_use=False,
    )


def _redacted(_logger: Any, _method: str, rendered: Any) -> Any:
    """The last step of the formatter: the rendered line without secrets."""
    return redact_secrets(rendered) if isinstance(rendered, str) else rendered


def event_fields(envelope: Envelope[Any]) -> dict[str, str]:
    """Log fields of an envelope: event id and type, correlation, and the object if known."""
    fields = {
        "event_id": envelope.id,
        "event_type": envelope.type,
        "correlation_id": envelope.correlationid,
    }
    # Read by attribute (extra fields of a raw payload too): dumping the payload copied a
    # whole observed object for four strings, on every message.
    for key in ("kind", "namespace", "name", "uid"):
        value = getattr(envelope.data, key, None)
        if isinstance(value, str):
            fields[key] = value
    return fields


@contextmanager
def bound_context(fields: Mapping[str, str | None]) -> Iterator[None]:
    """Bind ``fields`` (None values skipped) to every log line inside the block."""
    present = {key: value for key, value in fields.items() if value is not None}
    # Resetting the tokens restores exactly what was bound before, like structlog's
    # bound_contextvars, without reading the whole context first (once per message).
    tokens = structlog.contextvars.bind_contextvars(**present)
    try:
        yield
    finally:
        structlog.contextvars.reset_contextvars(**tokens)


def bind_event(envelope: Envelope[Any]) -> Any:
    """A context manager binding :func:`event_fields` of ``envelope``."""
    return bound_context(event_fields(envelope))
