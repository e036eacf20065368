"""The port through which the gateway learns who calls and what they may use (decision 0040).

:class:`~kaiwo_gateway.kubernetes_access.KubernetesAccess` answers with the API server's
TokenReview and SubjectAccessReview; tests may answer from a table.
"""

from __future__ import annotations

from typing import Protocol

from kaiwo_gateway.domain.access import Caller


class AccessUnavailableError(Exception):
    """The API server could not be asked (down, slow, or the gateway may not ask): the
    request is refused (503), never let through."""


class AccessBusyError(Exception):
    """Too many tokens are being reviewed at once: the request is refused (429) rather than
    queued, so a flood of unknown tokens cannot hold the gateway or the API server."""


class Access(Protocol):
    async def authenticate(self, token: str) -> Caller | None:
        """The caller a bearer token belongs to; None when it belongs to nobody (401)."""
        ...

    async def may_use(self, caller: Caller, namespace: str) -> bool:
        """Whether ``caller`` may use the Models of ``namespace``."""
        ...


class _LoopbackOnly:
    """The access of a gateway serving loopback callers only, all of them anonymous: it
    knows no token (never asked: every request comes from loopback)."""

    async def authenticate(self, token: str) -> Caller | None:  # noqa: ARG002
        return None

    async def may_use(self, caller: Caller, namespace: str) -> bool:  # noqa: ARG002
        return False


LOOPBACK_ONLY: Access = _LoopbackOnly()
