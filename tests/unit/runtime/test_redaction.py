"""Secrets never reach a log line or a printed message."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog
from kaiwo_runtime.logging import configure_logging
from kaiwo_runtime.redaction import redact_secrets, redact_url

SEED = "SUAMK3LWQVBMAHJ4T6XUCWTCF2MR5OURRWEEBSR7VOYH3SKTZMAQEBLUNQ"


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("nats://kaiwo:s3cret@nats:4222", "nats://kaiwo:***@nats:4222"),
        ("tls://kaiwo:p%40ss@nats.kaiwo-system:4222", "tls://kaiwo:***@nats.kaiwo-system:4222"),
        ("nats://t0ken@nats:4222", "nats://***@nats:4222"),
        (
            "postgresql://kaiwo:hunter2@db:5432/kaiwo?sslmode=require",
            "postgresql://kaiwo:***@db:5432/kaiwo?sslmode=require",
        ),
        ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
        ("sqlite:////var/lib/kaiwo/events.db", "sqlite:////var/lib/kaiwo/events.db"),
    ],
)
def test_a_url_keeps_everything_but_its_secret(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_text_loses_every_url_secret_and_nkey_seed() -> None:
    text = (
        f"NATS at nats://a:one@x:1 and nats://b:two@y:2 refused; seed {SEED} "
        "mail me at ops@example.com"
    )

    assert redact_secrets(text) == (
        "NATS at nats://a:***@x:1 and nats://b:***@y:2 refused; seed S*** "
        "mail me at ops@example.com"
    )


def test_log_lines_never_carry_a_password_or_a_seed_whoever_logs_them() -> None:
    out = io.StringIO()
    configure_logging(level="DEBUG", json=True, stream=out)

    structlog.get_logger("kaiwo.bus.nats").warning(
        "nats disconnected", url="nats://kaiwo:s3cret@nats:4222"
    )
    logging.getLogger("nats.aio.client").error("connect to nats://kaiwo:s3cret@nats:4222 failed")
    structlog.get_logger("kaiwo.test").info("seed read", seed=SEED)
    try:
        raise ConnectionError("postgresql://kaiwo:hunter2@db/kaiwo refused")
    except ConnectionError:
        structlog.get_logger("kaiwo.test").exception("store down")

    output = out.getvalue()
    assert "s3cret" not in output
    assert "hunter2" not in output
    assert SEED not in output
    lines = [json.loads(line) for line in output.splitlines()]
    assert lines[0]["url"] == "nats://kaiwo:***@nats:4222"
    assert lines[1]["event"] == "connect to nats://kaiwo:***@nats:4222 failed"
    assert lines[2]["seed"] == "S***"
    assert len(lines) == 4
