"""What ``kaiwo up`` leaves in its state directory for the other commands to find.

``<state-dir>/stack.json`` (mode 0600) names the NATS URL, the CLI's credentials file, the
CA to verify the server with (when TLS is on) and the event store's URL, so that
``kaiwo events tail|replay|explain|export`` need no flags after ``kaiwo up``, and never
attach to some other server that happens to listen on 4222. It also names the credentials
of the ``subscriber`` identity, which reads the public workload events only
(``examples/subscriber.py`` connects with them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kaiwo_runtime.nats_credentials import write_private

STATE_FILE = "stack.json"
DEFAULT_STATE_DIR = Path(".kaiwo")


class StackStateError(RuntimeError):
    """The state file is missing or unreadable; the message says what to do."""


@dataclass(frozen=True, slots=True)
class StackState:
    nats_url: str
    cli_credentials_file: Path
    event_store_url: str
    nats_tls_ca_file: Path | None = None
    subscriber_credentials_file: Path | None = None

    def write(self, state_dir: Path) -> Path:
        document: dict[str, Any] = {
            "natsUrl": self.nats_url,
            "cliCredentialsFile": str(self.cli_credentials_file),
            "eventStoreUrl": self.event_store_url,
            "natsTlsCaFile": str(self.nats_tls_ca_file) if self.nats_tls_ca_file else None,
            "subscriberCredentialsFile": (
                str(self.subscriber_credentials_file) if self.subscriber_credentials_file else None
            ),
        }
        return write_private(state_dir / STATE_FILE, json.dumps(document, indent=2).encode())

    @classmethod
    def read(cls, state_dir: Path) -> StackState:
        path = state_dir / STATE_FILE
        try:
            document = json.loads(path.read_text())
            ca = document.get("natsTlsCaFile")
            subscriber = document.get("subscriberCredentialsFile")
            return cls(
                nats_url=str(document["natsUrl"]),
                cli_credentials_file=Path(document["cliCredentialsFile"]),
                event_store_url=str(document["eventStoreUrl"]),
                nats_tls_ca_file=Path(ca) if ca else None,
                subscriber_credentials_file=Path(subscriber) if subscriber else None,
            )
        except FileNotFoundError as error:
            raise StackStateError(
                f"no {path}: start the operator with kaiwo up (or pass --state-dir, or "
                "--nats with --credentials)"
            ) from error
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise StackStateError(f"{path} cannot be read: {error}") from error
