"""Anonymous access is for loopback only, as the gateway's."""

from __future__ import annotations

import pytest
from kaiwo_console.settings import ConsoleSettings
from pydantic import ValidationError


def test_anonymous_access_needs_a_loopback_host() -> None:
    with pytest.raises(ValidationError, match="KAIWO_CONSOLE_ANONYMOUS=loopback needs a loopback"):
        ConsoleSettings(console_anonymous="loopback", console_host="0.0.0.0")

    assert ConsoleSettings(console_anonymous="loopback", console_host="127.0.0.1")
    assert ConsoleSettings().console_anonymous == "off"
