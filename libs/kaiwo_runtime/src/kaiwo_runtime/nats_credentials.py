"""Issue NKey credentials for the bus identities and write the nats-server configuration.

Each identity of :mod:`kaiwo_contracts.events.permissions` gets an NKey pair: the seed (the
secret) goes into a file only that identity's process reads, the public key into the
server's ``authorization`` block with the identity's permissions. The server configuration
therefore holds no secret. Files are written with mode 0600 in a directory of mode 0700.

The rendered configuration has no ``no_auth_user`` and no user without permissions: a
client without a known key is refused at connect.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nkeys
from kaiwo_contracts.events.permissions import Identity, issued_together

SEED_SUFFIX = ".nk"
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


@dataclass(frozen=True, slots=True)
class IssuedIdentity:
    """An identity with its new NKey pair. ``seed`` is the secret: never log it."""

    identity: Identity
    public_key: str
    seed: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class ServerTls:
    """The server's certificate and key; ``ca_file`` and ``verify_clients`` to require client
    certificates signed by that CA as well (mutual TLS)."""

    cert_file: Path
    key_file: Path
    ca_file: Path | None = None
    verify_clients: bool = False


def issue(identity: Identity) -> IssuedIdentity:
    """A fresh NKey user pair for ``identity``."""
    seed = bytes(nkeys.encode_seed(secrets.token_bytes(32), nkeys.PREFIX_BYTE_USER))
    key_pair = nkeys.from_seed(bytearray(seed))
    try:
        public_key = bytes(key_pair.public_key).decode()
    finally:
        key_pair.wipe()
    return IssuedIdentity(identity=identity, public_key=public_key, seed=seed)


def read_seed(path: Path, identity: Identity) -> IssuedIdentity:
    """The identity with the key pair whose seed ``path`` holds (to keep a key)."""
    seed = path.read_bytes().strip()
    key_pair = nkeys.from_seed(bytearray(seed))
    try:
        public_key = bytes(key_pair.public_key).decode()
    finally:
        key_pair.wipe()
    return IssuedIdentity(identity=identity, public_key=public_key, seed=seed)


def private_directory(path: Path) -> Path:
    """``path`` created if missing, and mode 0700 whether it was new or not."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    path.chmod(PRIVATE_DIR)
    return path


def write_private(path: Path, content: bytes) -> Path:
    """Write ``content`` to ``path`` with mode 0600 from the first byte (replacing the file).

    Through a new temporary file with a random name in the same directory (``mkstemp``:
    ``O_CREAT|O_EXCL``, never through a symbolic link), renamed over ``path``."""
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    temporary = Path(name)
    try:
        os.fchmod(descriptor, PRIVATE_FILE)
        with os.fdopen(descriptor, "wb") as output:
            output.write(content)
        temporary.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    return path


def write_seed(directory: Path, issued: IssuedIdentity) -> Path:
    """``<directory>/<identity>.nk``: the seed and a newline, mode 0600."""
    return write_private(
        private_directory(directory) / f"{issued.identity.name}{SEED_SUFFIX}", issued.seed + b"\n"
    )


def _quoted(values: Iterable[str]) -> str:
    return "[" + ", ".join(json.dumps(value) for value in values) + "]"


def _user(issued: IssuedIdentity) -> list[str]:
    permissions = issued.identity.permissions
    denied = f", deny: {_quoted(permissions.publish_denied)}" if permissions.publish_denied else ""
    publish = (
        f"publish: {{allow: {_quoted(permissions.publish)}{denied}}}"
        if permissions.publish
        else 'publish: {deny: [">"]}'
    )
    subscribe = (
        f"subscribe: {{allow: {_quoted(permissions.subscribe)}}}"
        if permissions.subscribe
        else 'subscribe: {deny: [">"]}'
    )
    return [
        f"    # {issued.identity.name}: {issued.identity.description}",
        f"    {{nkey: {json.dumps(issued.public_key)}, permissions: {{",
        f"      {publish}",
        f"      {subscribe}",
        "    }}",
    ]


def server_config(
    users: Sequence[IssuedIdentity], *, tls: ServerTls | None = None, http: str | None = None
) -> str:
    """The ``authorization`` block (one NKey user per identity), and ``tls`` when given.

    Include it with ``include`` or pass it with ``--config``; ports and storage may come from
    the command line. ``http`` (``127.0.0.1:8222``) turns the monitoring endpoint on there.
    """
    if not users:
        raise ValueError("a server needs at least one user: there is no anonymous access")
    lines = [
        "# Written by kaiwo (kaiwo_runtime.nats_credentials): one NKey user per identity,",
        "# each with explicit permissions; no anonymous user. Public keys only: no secret.",
        "authorization {",
        "  users = [",
    ]
    for issued in users:
        lines += _user(issued)
    lines += ["  ]", "}"]
    if tls is not None:
        lines += [
            "tls {",
            f"  cert_file: {json.dumps(str(tls.cert_file))}",
            f"  key_file: {json.dumps(str(tls.key_file))}",
            *([f"  ca_file: {json.dumps(str(tls.ca_file))}"] if tls.ca_file else []),
            f"  verify: {'true' if tls.verify_clients else 'false'}",
            "  timeout: 2",
            "}",
        ]
    if http is not None:
        lines.append(f"http: {json.dumps(http)}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class CredentialsDirectory:
    """Where :func:`write_credentials` put everything: the config and one seed per identity."""

    directory: Path
    server_config: Path
    seeds: dict[str, Path]

    def seed(self, identity: str) -> Path:
        return self.seeds[identity]


def write_credentials(
    directory: Path,
    identities: Sequence[Identity],
    *,
    tls: ServerTls | None = None,
    http: str | None = None,
    config_name: str = "nats-server.conf",
    keep_existing: bool = False,
) -> CredentialsDirectory:
    """Keys for every identity: the server configuration and one seed file each.

    By default every key is new: the old ones stop working once the server reads the new
    configuration (that is how credentials are rotated). ``keep_existing`` keeps the key of
    an identity whose seed file is there already (to add a reader without rotating).
    """
    names = [identity.name for identity in identities]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        # One seed file per name: the second would replace the first's key, and the first
        # identity's holder would run with the second's rights (a reader named "console").
        raise ValueError(f"two identities named {', '.join(map(repr, twice))}")
    private_directory(directory)
    issued = [
        read_seed(seed_file, identity)
        if keep_existing and (seed_file := directory / f"{identity.name}{SEED_SUFFIX}").is_file()
        else issue(identity)
        for identity in issued_together(identities)
    ]
    seeds = {entry.identity.name: write_seed(directory, entry) for entry in issued}
    config = write_private(
        directory / config_name, server_config(issued, tls=tls, http=http).encode()
    )
    return CredentialsDirectory(directory=directory, server_config=config, seeds=seeds)
