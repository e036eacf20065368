"""The demo's scenario is valid input, the demo refuses bad options naming them, and what it
says to try next names the scenario's workloads."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from kaiwo_cli.commands.demo import DEFAULT_SCENARIO, next_steps
from kaiwo_cli.main import app
from kaiwo_cli.stack.state import DEFAULT_STATE_DIR
from kaiwo_cli.workload_table import PhaseHistory, WorkloadRow

runner = CliRunner()


def test_the_scenario_validates() -> None:
    result = runner.invoke(app, ["validate", "-f", str(DEFAULT_SCENARIO)])
    assert (result.exit_code, result.output.strip()) == (0, "6 document(s) valid")


def test_bad_options_are_named() -> None:
    result = runner.invoke(app, ["demo", "--fleet", "tpu=2"])
    assert result.exit_code == 2
    assert "--fleet: unknown node type 'tpu'" in result.output
    result = runner.invoke(app, ["demo", "--cluster", "kind"])
    assert result.exit_code == 2
    assert "--cluster: 'kind' is not one of fake, envtest, kwok" in result.output


def history_of_the_scenario() -> PhaseHistory:
    history = PhaseHistory()
    rows = [
        WorkloadRow("ml-team", "broken-tokenizer", "KaiwoJob", "research", "RUNNING", 5),
        WorkloadRow("ml-team", "eval-sweep", "KaiwoJob", "research", "PENDING", 5, "no quota"),
        WorkloadRow("ml-team", "pretrain-llama", "KaiwoJob", "research", "PENDING", 5),
    ]
    history.record(rows)
    history.record(
        [
            WorkloadRow("ml-team", "broken-tokenizer", "KaiwoJob", "research", "FAILED", 9, "x"),
            WorkloadRow("ml-team", "eval-sweep", "KaiwoJob", "research", "COMPLETE", 9),
            WorkloadRow("ml-team", "pretrain-llama", "KaiwoJob", "research", "COMPLETE", 9),
        ]
    )
    return history


def test_what_to_try_next_names_the_scenario_s_workloads(tmp_path: Path) -> None:
    text = next_steps(
        history=history_of_the_scenario(),
        kubeconfig=tmp_path / "kubeconfig",
        state_dir=DEFAULT_STATE_DIR,
        kaiwo=".venv/bin/kaiwo",
    ).plain
    try_next = text.split("Try, ")[1]
    assert try_next.splitlines() == [
        "in another shell in this directory:",
        "  .venv/bin/kaiwo submit -f examples/kaiwojob-gpu-training.yaml --wait",
        "  .venv/bin/kaiwo list",
        "  .venv/bin/kaiwo status ml-team/eval-sweep      # why it waited",
        "  .venv/bin/kaiwo logs ml-team/broken-tokenizer  # its last words",
        "  .venv/bin/kaiwo queues",
        "  .venv/bin/kaiwo events explain ml-team/broken-tokenizer",
        "  .venv/bin/kaiwo events tail",
        "With kubectl:",
        f"  export KUBECONFIG={tmp_path / 'kubeconfig'}",
        "  kubectl get kaiwojobs,kaiwoservices -A      # the printer columns",
        "  kubectl get workloads.kueue.x-k8s.io -A     # Kueue's admissions",
        "  kubectl logs -n ml-team -l kaiwo.silogen.ai/name=broken-tokenizer",
        "Ctrl-C stops everything.",
    ]
    assert "ml-team/eval-sweep waited: no quota" in text


def test_a_state_directory_elsewhere_is_named(tmp_path: Path) -> None:
    text = next_steps(
        history=history_of_the_scenario(),
        kubeconfig=None,
        state_dir=tmp_path / "state",
        kaiwo="kaiwo",
    ).plain
    assert f"Try, in another shell, after export KAIWO_STATE={tmp_path / 'state'}:" in text
