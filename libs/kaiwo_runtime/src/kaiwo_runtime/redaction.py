"""Keep secrets out of logs and messages: one function for every URL that is printed or logged.

``nats://kaiwo:s3cret@nats:4222`` becomes ``nats://kaiwo:***@nats:4222``; a URL with a token
and no user (``nats://t0ken@nats:4222``) becomes ``nats://***@nats:4222``; NKey seeds
(``SU…``, 58 characters) become ``S***``. :func:`redact_secrets` does the same inside any
text (an error message, a rendered log line); the logging set-up runs every line through it.
"""

from __future__ import annotations

import re

MASK = "***"

_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^@/\s?#]+)@",
)
_NKEY_SEED = re.compile(r"\bS[ACNOPUX][A-Z2-7]{56}\b")


def _masked_userinfo(match: re.Match[str]) -> str:
    user, colon, _secret = match.group("userinfo").partition(":")
    if not colon:  # a bare token
        return f"{match.group('scheme')}{MASK}@"
    return f"{match.group('scheme')}{user}:{MASK}@"


def redact_url(url: str) -> str:
    """``url`` with its password (or token) replaced by ``***``; the rest is kept."""
    return _USERINFO.sub(_masked_userinfo, url)


def redact_secrets(text: str) -> str:
    """Every URL's password or token and every NKey seed in ``text`` replaced by ``***``."""
    if "@" in text:
        text = _USERINFO.sub(_masked_userinfo, text)
    if len(text) >= 58:
        text = _NKEY_SEED.sub(f"S{MASK}", text)
    return text
