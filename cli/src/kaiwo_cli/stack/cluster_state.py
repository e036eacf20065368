"""``kaiwo up``'s kept state belongs to one cluster (decision 0042).

The JetStream directory (``nats/``: the watcher's checkpoints, the planner's snapshot, the
executor's memo, the event streams) and the SQLite event store (``events.db``) of a state
directory are those of the cluster named in ``<state>/cluster.json`` (the uid of its
``kube-system`` namespace). Started against another cluster, ``kaiwo up`` moves them aside to
``<state>/clusters/<their uid>/``, brings back that cluster's own from there if it ran here
before, or starts fresh, and says so in one line. Nothing is deleted, and two clusters' state
is never mixed. State left by a version that did not record its cluster counts as another
cluster's (``clusters/unrecorded``).

Standard library only: :func:`recorded_cluster` is read by every ``kaiwo events`` command.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

CLUSTER_FILE = "cluster.json"
KEPT_DIR = "clusters"
UNRECORDED = "unrecorded"
PER_CLUSTER: tuple[str, ...] = ("nats", "events.db", "events.db-wal", "events.db-shm")
"""What in a state directory belongs to the cluster it was filled from."""


@dataclass(frozen=True, slots=True)
class Arrangement:
    """What to do with a state directory for cluster ``current``."""

    set_aside_as: str | None = None
    """Move the present state to ``clusters/<this>`` (None: keep it where it is)."""
    bring_back: bool = False
    """Move ``clusters/<current>`` back into place."""

    def note(self, state_dir: Path, current: str, *, kept_in: Path) -> str | None:
        """The one line that says what was done (None: nothing to say); ``kept_in``: where
        the state was set aside."""
        if self.set_aside_as is None:
            return None
        was = (
            "of a cluster it did not record"
            if self.set_aside_as == UNRECORDED
            else f"of another cluster (kube-system uid {self.set_aside_as})"
        )
        then = (
            f"this cluster's own ({current}) is back from {state_dir / KEPT_DIR / current}"
            if self.bring_back
            else f"this cluster ({current}) starts with fresh state"
        )
        return f"the state in {state_dir} was {was}: kept in {kept_in}; {then}"


def arrangement(
    recorded: str | None, current: str, *, has_state: bool, kept: frozenset[str]
) -> Arrangement:
    """Pure: what ``kaiwo up`` does with a state directory whose state is of cluster
    ``recorded`` (None: not recorded), when it starts against cluster ``current``; ``kept`` are
    the clusters whose state waits in ``clusters/``."""
    if recorded == current or (recorded is None and not has_state):
        return Arrangement()
    if not has_state:  # a recorded cluster that left nothing behind: nothing to set aside
        return Arrangement(bring_back=current in kept)
    return Arrangement(set_aside_as=recorded or UNRECORDED, bring_back=current in kept)


def recorded_cluster(state_dir: Path) -> str | None:
    """The cluster the state in ``state_dir`` is of (None: not recorded, or unreadable)."""
    try:
        document = json.loads((state_dir / CLUSTER_FILE).read_text())
    except (OSError, ValueError):
        return None
    uid = document.get("uid") if isinstance(document, dict) else None
    return uid if isinstance(uid, str) and uid else None


def bind_state_dir(state_dir: Path, current: str) -> str | None:
    """Arrange ``state_dir`` for cluster ``current`` (see the module's doc) and record it; the
    one line to show, when anything moved."""
    kept_dir = state_dir / KEPT_DIR
    kept = frozenset(p.name for p in kept_dir.iterdir()) if kept_dir.is_dir() else frozenset()
    present = [state_dir / name for name in PER_CLUSTER if (state_dir / name).exists()]
    plan = arrangement(recorded_cluster(state_dir), current, has_state=bool(present), kept=kept)
    aside = kept_dir / UNRECORDED
    if plan.set_aside_as is not None:
        aside = _free_directory(kept_dir / plan.set_aside_as)
        aside.mkdir(parents=True, mode=0o700)
        for path in present:
            path.rename(aside / path.name)
    if plan.bring_back:
        back = kept_dir / current
        for path in back.iterdir():
            path.rename(state_dir / path.name)
        back.rmdir()
    _record(state_dir, current)
    return plan.note(state_dir, current, kept_in=aside)


def _free_directory(wanted: Path) -> Path:
    """``wanted``, or ``wanted-2``, ``-3``... when a state is kept there already (the same
    cluster's state set aside twice, e.g. an unrecorded one)."""
    candidate, number = wanted, 1
    while candidate.exists():
        number += 1
        candidate = wanted.with_name(f"{wanted.name}-{number}")
    return candidate


def _record(state_dir: Path, current: str) -> None:
    path = state_dir / CLUSTER_FILE
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps({"uid": current}) + "\n")
    temporary.chmod(0o600)
    temporary.replace(path)
