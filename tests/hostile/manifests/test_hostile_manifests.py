"""The hostile manifest corpus through ``kaiwo validate`` (in-process) and the planner.

Each case of :mod:`tests.hostile.manifests.corpus` is written to a file and checked with
``kaiwo validate -f``: no traceback, within :data:`BOUND_SECONDS` of CPU time, and the
outcome written in the corpus (refused with the reason, or the field named). Cases that the
API server could still hold (an older CRD) are also planned: the owner gets ``Valid=False``
naming the field and a Warning Event. Valid ones are planned and their children checked.

``pytest tests/hostile/manifests -s`` prints the table (case, outcome, seconds).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_planner.domain.state.cluster import ClusterState

from tests.hostile.manifests.corpus import HostileManifest, build_corpus
from tests.planning_calls import planned

BOUND_SECONDS = 5.0
"""CPU seconds of this process: far above what a case takes (milliseconds), far below a stall:
the billion laughs of the issue ran out of memory after 30 s, YAML nested 900 deep gave a
traceback. CPU time, not wall-clock time: other processes on a loaded machine do not add to it."""
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
CORPUS = build_corpus()
ROWS: list[tuple[str, str, float]] = []


@pytest.fixture(scope="module", autouse=True)
def table() -> Iterator[None]:
    yield
    counts: dict[str, int] = {}
    print(f"\n{'case':<34} {'outcome':<18} {'seconds':>8}")
    for name, outcome, seconds in ROWS:
        counts[outcome] = counts.get(outcome, 0) + 1
        print(f"{name:<34} {outcome:<18} {seconds:>8.3f}")
    print(f"{len(ROWS)} cases: " + ", ".join(f"{n} {o}" for o, n in sorted(counts.items())))


def cluster(*objects: dict[str, Any]) -> ClusterState:
    """The default queue ``kaiwo`` for every namespace, and ``objects``."""
    flavors = [{"name": "cpu", "resources": [{"name": "cpu", "nominalQuota": 256}]}]
    queues = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "kqc-uid", "generation": 1},
        "spec": {
            "resourceFlavors": [{"name": "cpu"}],
            "clusterQueues": [
                {
                    "name": "kaiwo",
                    "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": flavors}]},
                }
            ],
        },
    }
    return ClusterState.from_wire(objects=[queues, *objects], namespaces=["ml-team", "vision"])


def stored(text: str) -> dict[str, Any]:
    """The manifest as an API server would hand it to the operator."""
    owner: dict[str, Any] = yaml.safe_load(text)
    owner["metadata"].update(uid="hostile-uid", generation=1, resourceVersion="5")
    return owner


def labels_in(tree: Any) -> Iterator[str]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key in {"labels", "matchLabels", "selector"} and isinstance(value, dict):
                yield from (v for v in value.values() if isinstance(v, str))
            yield from labels_in(value)
    elif isinstance(tree, list):
        for item in tree:
            yield from labels_in(item)


def check_planned(manifest: HostileManifest) -> None:
    if manifest.outcome in {"refused reading", "field error"}:
        return
    owner = stored(manifest.text)
    if manifest.outcome == "Valid=False":
        plan = planned(owner=owner, cluster=cluster(), now=NOW)
        assert plan is not None and plan.status is not None
        [valid] = [c for c in plan.status["conditions"] if c["type"] == "Valid"]
        assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
        assert f"{manifest.expect}: " in valid["message"], valid["message"]
        assert [(e.type, e.reason) for e in plan.events] == [("Warning", "InvalidSpec")]
        assert plan.desired == ()
    elif manifest.outcome == "bounded children":
        plan = planned(owner=owner, cluster=cluster(), now=NOW)
        assert plan is not None and plan.desired
        for child in plan.desired:
            assert len(child["metadata"]["name"]) <= 63, child["metadata"]["name"]
            for value in labels_in(child):
                assert len(value) <= 63 and LABEL_VALUE.match(value), value
    elif manifest.outcome == "reference ignored":
        alone = planned(owner=owner, cluster=cluster(owner), now=NOW)
        forged = planned(owner=owner, cluster=cluster(owner, *manifest.extra), now=NOW)
        assert forged == alone


@pytest.mark.parametrize("manifest", CORPUS, ids=[m.name for m in CORPUS])
def test_a_hostile_manifest_gets_its_outcome(manifest: HostileManifest, tmp_path: Path) -> None:
    path = tmp_path / "manifest.yaml"
    path.write_text(manifest.text, encoding="utf-8")

    started = time.process_time()
    result = CliRunner().invoke(app, ["validate", "-f", str(path)], env={"COLUMNS": "400"})
    check_planned(manifest)
    elapsed = time.process_time() - started

    output = result.output
    assert "Traceback" not in output
    assert result.exception is None or isinstance(result.exception, SystemExit), output
    assert elapsed < BOUND_SECONDS
    if manifest.outcome in {"bounded children", "reference ignored"}:
        assert result.exit_code == 0, output
    else:
        assert result.exit_code == 1, output
    if manifest.outcome == "refused reading":
        assert f"refused: {manifest.expect}" in output or manifest.expect in output, output
        assert "document(s) invalid" not in output
    elif manifest.outcome in {"field error", "Valid=False"}:
        assert f"{manifest.expect}: " in output, output
    ROWS.append((manifest.name, manifest.outcome, elapsed))


def test_the_corpus_has_at_least_40_cases() -> None:
    assert len(CORPUS) >= 40
    assert len({m.name for m in CORPUS}) == len(CORPUS)
