"""What the CLI's help and docs/cli.md promise, held to it (decision 0221): ``submit -n``'s
default is ``default``, ``status`` offers the formats it takes, ``validate`` and ``plan`` read
``-f -`` from standard input, and the ``gpus`` entry names every kind the command lists."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner, Result
from kaiwo_cli.main import app

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
NOW = "2026-01-01T12:00:00Z"


def run(*arguments: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, list(arguments), input=stdin, env={"COLUMNS": "300"})


def option_help(command: str, option: str) -> str:
    """One option of ``kaiwo COMMAND --help`` with its help, its wrapped lines joined."""
    result = run(command, "--help")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    [start] = [number for number, text in enumerate(lines) if text.lstrip().startswith(option)]
    end = start + 1
    while end < len(lines) and lines[end].startswith(" " * 8):  # the help's next lines
        end += 1
    return re.sub(r"\s+", " ", " ".join(lines[start:end]).strip())


# --------------------------------------------------------------------------- submit -n


def test_submit_namespace_help_names_default_as_the_code_and_upstream_do() -> None:
    # It said "default: the kubeconfig context's"; a manifest without a namespace goes to
    # `default` (prepare_manifest, docs/cli.md, upstream's `-n/--namespace (default default)`).
    assert option_help("submit", "-n, --namespace") == (
        "-n, --namespace TEXT Namespace of a manifest that names none (default: default, as "
        "upstream's; not the kubeconfig context's)."
    )


def test_the_other_commands_namespace_help_says_their_own_defaults() -> None:
    for command in ("status", "logs", "delete"):
        assert option_help(command, "-n, --namespace") == (
            "-n, --namespace TEXT Namespace (default: the kubeconfig context's; list, queues "
            "and gpus: every one)."
        )


# --------------------------------------------------------------------------- status -o


def test_status_offers_the_formats_it_takes_and_wide_is_lists() -> None:
    # `status -o wide` was advertised (the list's help) and refused.
    assert option_help("status", "-o, --output") == (
        "-o, --output TEXT yaml, json or name: the object (default: the report)."
    )
    refused = run("status", "ml-team/x", "-o", "wide")
    assert refused.exit_code == 2
    assert "'wide' is not one of yaml, json, name" in refused.output
    assert option_help("list", "-o, --output") == (
        "-o, --output TEXT wide, yaml, json or name (default: a table)."
    )


# --------------------------------------------------------------------------- -f -


BROKEN_JOB = """\
apiVersion: kaiwo.silogen.ai/v1alpha1
kind: KaiwoJob
metadata: {name: broken, namespace: ml-team}
spec: {image: busybox, gpus: -1}
"""


def test_validate_reads_standard_input_for_dash() -> None:
    # It required the path to exist: "Path '-' does not exist.", exit 2.
    example = (EXAMPLES / "kaiwojob-ray.yaml").read_text()
    valid = run("validate", "-f", "-", stdin=example)
    assert (valid.exit_code, valid.output) == (0, "1 document(s) valid\n")

    invalid = run("validate", "-f", "-", stdin=BROKEN_JOB)
    assert (invalid.exit_code, invalid.output) == (
        1,
        "-:doc#1 KaiwoJob/broken: spec.gpus: must be at least 0\n"
        "1 of 1 document(s) invalid (1 problem(s))\n",
    )

    together = run("validate", "-f", str(EXAMPLES / "kaiwojob-ray.yaml"), "-f", "-", stdin=example)
    assert (together.exit_code, together.output) == (0, "2 document(s) valid\n")


def test_validate_still_refuses_a_path_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    result = run("validate", "-f", str(missing))
    assert result.exit_code == 2
    assert f"Invalid value for '--filename' / '-f': path '{missing}' does not exist." in (
        result.output
    )


def test_plan_reads_standard_input_for_dash() -> None:
    # It said "-: no such file or directory", exit 1.
    path = EXAMPLES / "kaiwojob-ray.yaml"
    piped = run("plan", "-f", "-", "--now", NOW, stdin=path.read_text())
    assert piped.exit_code == 0, piped.output
    assert [line for line in piped.output.splitlines() if line.startswith("# Plan for")] == [
        "# Plan for KaiwoJob vision/batch-inference-ray (-)",
        "# Plan for KaiwoJob vision/batch-inference-ray (-, once Job "
        "vision/batch-inference-ray-download has succeeded (assumed))",
    ]
    from_file = run("plan", "-f", str(path), "--now", NOW)
    assert piped.output == from_file.output.replace(f"({path}", "(-")


def test_plan_reads_standard_input_once_for_the_manifests_only() -> None:
    empty = run("plan", "-f", "-", stdin="")
    assert (empty.exit_code, empty.stderr) == (1, "-: no manifests found\n")
    nodes = run("plan", "-f", str(EXAMPLES / "kaiwojob-ray.yaml"), "--nodes", "-", stdin="")
    assert (nodes.exit_code, nodes.stderr) == (
        1,
        "-: standard input is read for -f only (--nodes, --config, --queue-config and "
        "--observed take files)\n",
    )


# --------------------------------------------------------------------------- docs: gpus


def test_the_gpus_entry_of_the_docs_names_every_kind_the_command_lists() -> None:
    # It said "the GPU workloads no Kaiwo kind owns"; since decision 0056 the command lists
    # the opted-in KaiwoJobs and KaiwoServices too (its help says so).
    docs = (REPO / "docs" / "cli.md").read_text()
    [entry] = re.findall(r"^- \*\*`gpus .*?(?=^- \*\*)", docs, flags=re.MULTILINE | re.DOTALL)
    entry = re.sub(r"\s+", " ", entry)
    helped = re.sub(r"\s+", " ", run("gpus", "--help").output)
    kinds = ("KaiwoJobs", "KaiwoServices", "Pods", "Jobs", "Deployments", "StatefulSets")
    for kind in (*kinds, "RayJobs", "RayClusters"):
        assert kind in helped and kind in entry, kind
    assert "every GPU workload GPU idle preemption tracks: KaiwoJobs and KaiwoServices" in entry
