"""``kaiwo demo`` end to end: the whole operator (fake API server, NATS, event store, every
service and the monitor) with the sandbox's simulated controllers plays the demo scenario;
the live table's output is captured and read.

And the same scenario on the real stack (``--cluster kwok``: the real control plane,
kube-scheduler, Kueue and KubeRay, kwok's nodes), with the same expectations: the simulated
Kueue and the real one make the same jobs wait, for the same reason in the same words, and the
same jobs run, fail and serve (what still differs is in docs/sandbox.md).

Time runs at 0.3 of the demo's pace (``--time-scale``) to keep CI short; the order of events is
the same.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_envtest import AssetsNotFoundError, StackNotBuiltError, built_stack, find_binaries

from tests.real_cluster import unavailable

SCENARIO = Path(__file__).resolve().parents[2] / "cli/src/kaiwo_cli/scenarios/demo.yaml"


def _row(output: str, name: str) -> str:
    """The final table's row of ``name`` (the table is printed once more when the demo ends)."""
    rows = [line for line in output.splitlines() if f"ml-team/{name} " in line and "│" in line]
    assert rows, f"no row for {name} in:\n{output}"
    return rows[-1]


def stack_assets() -> list[str]:
    """``--envtest-assets`` for the built stack's binaries (skipped, or failed under
    ``KAIWO_REQUIRE_REAL_APISERVER=1``, without them)."""
    try:
        binaries = find_binaries()
        built_stack()
        for name in ("kube-scheduler", "kwok", "kueue", "kuberay"):
            binaries.path(name)
    except (AssetsNotFoundError, StackNotBuiltError) as error:
        unavailable(str(error))
        raise
    return ["--envtest-assets", str(binaries.directory)]


def play(scenario: Path, tmp_path: Path, *, cluster: str = "fake") -> Any:
    """``kaiwo demo`` of ``scenario`` at 0.3 of its pace, until it settles (80 s at most; 240 s
    with the whole stack to start first)."""
    arguments = ["demo", "--cluster", cluster, *(stack_assets() if cluster == "kwok" else [])]
    arguments += ["--scenario", str(scenario), "--state-dir", str(tmp_path / "kaiwo")]
    within = "80" if cluster == "fake" else "240"
    arguments += ["--time-scale", "0.3", "--exit-when-settled", "--within", within]
    return CliRunner().invoke(app, arguments, env={"COLUMNS": "260"})


# A scientist's own KaiwoJob, in a namespace of their own and with no queue named, added to
# the scenario: one play checks both (each play of the scenario costs 25-100 s of CI).
OWN_JOB = """
---
apiVersion: v1
kind: Namespace
metadata:
  name: my-project
---
apiVersion: kaiwo.silogen.ai/v1alpha1
kind: KaiwoJob
metadata:
  name: my-experiment
  namespace: my-project
  annotations:
    sandbox.kaiwo.silogen.ai/run-seconds: "3"
spec:
  user: dora@example.com
  image: ghcr.io/silogen/rocm-ray:6.4
  entrypoint: python my_experiment.py
  gpus: 1
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "cluster",
    # The whole stack starts in the test (20-60 s on a busy machine) besides the scenario.
    ["fake", pytest.param("kwok", marks=[pytest.mark.k8s, pytest.mark.timeout(480)])],
)
def test_the_demo_scenario_plays_out_in_the_live_table(cluster: str, tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO.read_text() + OWN_JOB)
    started = time.monotonic()
    result = play(scenario, tmp_path, cluster=cluster)
    elapsed = time.monotonic() - started
    output = result.output
    assert result.exit_code == 0, output
    assert "SIMULATION" in output
    header = next(line for line in output.splitlines() if "NAMESPACE/NAME" in line)
    assert re.findall(r"[A-Z/]+", header) == [
        "NAMESPACE/NAME",
        "KIND",
        "QUEUE",
        "PHASE",
        "SEEN",
        "AGE",
        "DETAIL",
    ]
    # Jobs ran and completed; the table polls twice a second, so a short phase (the others'
    # PENDING lasts 0.6 s at this pace) may fall between two looks, eval-sweep's wait not.
    for name in ("pretrain-llama", "finetune-mistral", "eval-sweep"):
        row = _row(output, name)
        assert "KaiwoJob" in row and "research" in row and "COMPLETE" in row
        assert re.search(r"RUNNING → COMPLETE", row.split("│")[5]), row
    eval_seen = _row(output, "eval-sweep").split("│")[5]
    assert re.search(r"PENDING → .*RUNNING → COMPLETE", eval_seen), eval_seen
    # The queue was full: eval-sweep waited for the 8 AMD GPUs the other two held.
    assert (
        "ml-team/eval-sweep waited: couldn't assign flavors to pod set main: insufficient "
        "quota for amd.com/gpu in flavor nvidia-h100, previously considered podsets requests "
        "(0) + current podset request (8) > maximum capacity (0), insufficient unused quota for "
        "amd.com/gpu in flavor amd-mi300x, 8 more needed"
    ) in " ".join(output.split())
    # One failure, with the reason the container gave.
    failed = _row(output, "broken-tokenizer")
    assert "FAILED" in failed and "BackoffLimitExceeded" in failed and "FileNotFoundError" in failed
    assert (
        "ml-team/broken-tokenizer failed: BackoffLimitExceeded: Job has reached the specified "
        "backoff limit: FileNotFoundError: "
        "/workload/tokenizer.json"
    ) in output
    # The service serves.
    service = _row(output, "chat")
    assert "KaiwoService" in service and "READY" in service
    # What to try next.
    assert "kubectl get kaiwojobs,kaiwoservices -A" in output
    if cluster == "fake":
        kubeconfig = tmp_path / "kaiwo" / "fake-cluster" / "kubeconfig"
        assert f"export KUBECONFIG={kubeconfig}" in output
    else:
        assert re.search(r"export KUBECONFIG=\S+/kaiwo-envtest-\w+/kubeconfig", output), output
    # A scientist's own job without a queue runs in any namespace: on the KaiwoConfig's
    # default queue, which the demo's queue config defines (on kwok the real Kueue admits it).
    own = [
        line for line in output.splitlines() if "my-project/my-experiment " in line and "│" in line
    ]
    assert own, output
    assert "kaiwo" in own[-1].split("│")[3] and "COMPLETE" in own[-1], own[-1]
    print(f"demo --cluster {cluster} at 0.3 pace: {elapsed:.1f} s; {output.splitlines()[-12]}")
