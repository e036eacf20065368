"""``kaiwo up``'s state directory is bound to one cluster: another cluster's state is set
aside (never mixed, never deleted) and comes back when that cluster does (decision 0042)."""

from __future__ import annotations

from pathlib import Path

from kaiwo_cli.stack.cluster_state import (
    Arrangement,
    arrangement,
    bind_state_dir,
    recorded_cluster,
)

NONE: frozenset[str] = frozenset()


def test_the_same_cluster_or_a_new_directory_moves_nothing() -> None:
    assert arrangement("uid-a", "uid-a", has_state=True, kept=NONE) == Arrangement()
    assert arrangement(None, "uid-a", has_state=False, kept=NONE) == Arrangement()


def test_another_clusters_state_is_set_aside() -> None:
    assert arrangement("uid-a", "uid-b", has_state=True, kept=NONE) == Arrangement(
        set_aside_as="uid-a"
    )
    assert arrangement("uid-a", "uid-b", has_state=True, kept=frozenset({"uid-b"})) == (
        Arrangement(set_aside_as="uid-a", bring_back=True)
    )


def test_state_of_an_unrecorded_cluster_counts_as_another_clusters() -> None:
    assert arrangement(None, "uid-a", has_state=True, kept=NONE) == Arrangement(
        set_aside_as="unrecorded"
    )


def _fill(state: Path, marker: str) -> None:
    (state / "nats" / "jetstream").mkdir(parents=True)
    (state / "nats" / "jetstream" / "marker").write_text(marker)
    (state / "events.db").write_text(marker)


def test_a_switch_there_and_back_keeps_each_clusters_state_apart(tmp_path: Path) -> None:
    state = tmp_path / ".kaiwo"
    state.mkdir()
    (state / "credentials").mkdir()

    assert bind_state_dir(state, "uid-demo") is None
    _fill(state, "demo")

    note = bind_state_dir(state, "uid-real")
    assert note == (
        f"the state in {state} was of another cluster (kube-system uid uid-demo): kept in "
        f"{state / 'clusters' / 'uid-demo'}; this cluster (uid-real) starts with fresh state"
    )
    assert not (state / "nats").exists() and not (state / "events.db").exists()
    assert (state / "clusters" / "uid-demo" / "events.db").read_text() == "demo"
    assert (state / "credentials").is_dir()  # not the cluster's: stays
    assert recorded_cluster(state) == "uid-real"
    _fill(state, "real")

    note = bind_state_dir(state, "uid-demo")
    assert note == (
        f"the state in {state} was of another cluster (kube-system uid uid-real): kept in "
        f"{state / 'clusters' / 'uid-real'}; this cluster's own (uid-demo) is back from "
        f"{state / 'clusters' / 'uid-demo'}"
    )
    assert (state / "events.db").read_text() == "demo"
    assert (state / "nats" / "jetstream" / "marker").read_text() == "demo"
    assert (state / "clusters" / "uid-real" / "events.db").read_text() == "real"
    assert not (state / "clusters" / "uid-demo").exists()
    assert recorded_cluster(state) == "uid-demo"

    assert bind_state_dir(state, "uid-demo") is None  # the same cluster again: nothing moves
    assert (state / "events.db").read_text() == "demo"


def test_state_from_before_clusters_were_recorded_is_set_aside_too(tmp_path: Path) -> None:
    state = tmp_path / ".kaiwo"
    _fill(state, "old")
    (state / "clusters" / "unrecorded").mkdir(parents=True)  # an earlier one, kept

    note = bind_state_dir(state, "uid-a")

    assert note == (
        f"the state in {state} was of a cluster it did not record: kept in "
        f"{state / 'clusters' / 'unrecorded-2'}; this cluster (uid-a) starts with fresh state"
    )
    assert (state / "clusters" / "unrecorded-2" / "events.db").read_text() == "old"
