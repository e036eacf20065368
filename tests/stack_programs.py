"""Programs of the Kubernetes stack the project builds (``make stack``) that tests run
themselves: ``kubectl`` (v1.36, the control plane's own version), ``prometheus`` and ``nats``
(the NATS command line docs/events.md shows a subscriber).

Never the machine's: a distribution's kubectl is years old (Debian's is 1.20) and its
Prometheus a major version behind. ``KAIWO_ENVTEST_ASSETS``, when set, is the only place
looked at, as for the control plane (:func:`kaiwo_envtest.find_binaries`). Without the
program the test is skipped with the reason, or fails under ``KAIWO_REQUIRE_REAL_APISERVER=1``.
"""

from __future__ import annotations

from kaiwo_envtest import AssetsNotFoundError, find_binaries

from tests.required import unavailable


def stack_program(name: str) -> str:
    """The path of the stack's program ``name`` (``kubectl``, ``prometheus``, ...)."""
    try:
        return str(find_binaries().path(name))
    except AssetsNotFoundError as error:
        unavailable(name, str(error))
