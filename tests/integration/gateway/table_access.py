"""Who callers are, from a table: the gateway's access port for tests that run it without an
API server. :class:`~kaiwo_gateway.kubernetes_access.KubernetesAccess`, which asks the API
server, is tested on a real one (``test_gateway_access_real_cluster.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kaiwo_gateway.domain.access import Caller


@dataclass
class TableAccess:
    """``tokens``: bearer token -> caller; ``namespaces``: caller name -> what they may use.
    Every question is recorded, so a test can tell what the gateway asked."""

    tokens: Mapping[str, Caller]
    namespaces: Mapping[str, frozenset[str]]
    asked: list[tuple[str, str]] = field(default_factory=list)

    async def authenticate(self, token: str) -> Caller | None:
        self.asked.append(("token", token))
        return self.tokens.get(token)

    async def may_use(self, caller: Caller, namespace: str) -> bool:
        self.asked.append((caller.name, namespace))
        return namespace in self.namespaces.get(caller.name, frozenset())
