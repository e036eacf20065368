"""``kaiwo demo`` as a user runs it, and a scientist's second shell beside it.

The demo runs as a process in a pseudo-terminal, from a directory laid out like a checkout
(``examples/`` and ``.venv``), at 0.3 of its pace. The test reads the live table as it is
redrawn, waits until the scenario has played out, then runs the commands the demo says to try
as printed, each a separate process from the same directory with no flags: ``submit --wait``
ends COMPLETE; ``list``, ``status``, ``logs``, ``queues`` and ``events explain`` show the
workloads; ``logs -f`` follows a job from its download to its end while ``status -w`` reprints
it. Ctrl-C, typed, stops the demo.

On the fake API server and on a real one (``--cluster envtest``), where ``kaiwo logs`` reads
through kube-apiserver's ``pods/log`` from the sandbox's kubelet endpoint.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from pathlib import Path
from typing import Final

import pytest
import yaml
from kaiwo_envtest import AssetsNotFoundError, find_binaries

from tests.integration.terminal import Terminal
from tests.real_cluster import REPO_ROOT, unavailable
from tests.stack_programs import stack_program

pytestmark = [pytest.mark.slow, pytest.mark.nats, pytest.mark.timeout(600)]

EXAMPLE: Final = "examples/kaiwojob-gpu-training.yaml"
SUBMITTED: Final = "ml-team/llama-3-8b-sft"
FOLLOWED: Final = "ml-team/sft-followed"


def checkout(directory: Path) -> Path:
    """A directory where a user would run ``make demo``: examples and the virtualenv."""
    directory.mkdir()
    (directory / "examples").symlink_to(REPO_ROOT / "examples")
    (directory / ".venv").symlink_to(REPO_ROOT / ".venv")
    return directory


def user_environment(home: Path) -> dict[str, str]:
    """A fresh user's: no kaiwo config, no kubeconfig, no state named."""
    home.mkdir(exist_ok=True)
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("KAIWO", "KUBECONFIG"))}
    kept.pop("COLUMNS", None)
    kept.pop("LINES", None)
    assets = os.environ.get("KAIWO_ENVTEST_ASSETS")
    if assets:
        kept["KAIWO_ENVTEST_ASSETS"] = assets
    return {**kept, "HOME": str(home), "TERM": "xterm-256color"}


def run(command: str, *, cwd: Path, env: dict[str, str], within: float = 180) -> tuple[int, str]:
    """One command typed in the second shell; its stdout and stderr together."""
    done = subprocess.run(
        shlex.split(command),
        cwd=cwd,
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=within,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def try_next(screen: str) -> list[str]:
    """The commands under "Try, in another shell in this directory:", comments removed."""
    block = screen.rsplit("Try, in another shell in this directory:", maxsplit=1)[-1]
    block = block.split("With kubectl:")[0]
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def phases_drawn(screen: str, name: str) -> list[str]:
    """The phase of ``name`` in every drawing of the live table, in order (repeats folded)."""
    drawn: list[str] = []
    for line in screen.splitlines():
        if f"ml-team/{name} " in line and "│" in line:
            phase = line.split("│")[4].strip()
            if phase and (not drawn or drawn[-1] != phase):
                drawn.append(phase)
    return drawn


def followed_manifest(directory: Path) -> Path:
    """The example job under another name, running 40 s (at 0.3 pace: 12 s), long enough
    for the second shell's commands to start while it runs."""
    example = yaml.safe_load((REPO_ROOT / EXAMPLE).read_text())
    example["metadata"]["name"] = FOLLOWED.split("/")[1]
    example["metadata"]["annotations"] = {"sandbox.kaiwo.silogen.ai/run-seconds": "40"}
    path = directory / "followed.yaml"
    path.write_text(yaml.safe_dump(example))
    return path


@pytest.mark.parametrize("cluster", ["fake", pytest.param("envtest", marks=pytest.mark.k8s)])
def test_with_the_demo_running_a_second_shell_submits_follows_and_inspects(
    cluster: str, tmp_path: Path
) -> None:
    here = checkout(tmp_path / "checkout")
    env = user_environment(tmp_path / "home")
    demo = [".venv/bin/kaiwo", "demo", "--time-scale", "0.3"]
    if cluster == "envtest":
        try:
            binaries = find_binaries()
        except AssetsNotFoundError as error:
            unavailable(str(error))
            raise
        demo += ["--cluster", "envtest", "--envtest-assets", str(binaries.directory)]
    started = time.monotonic()
    with Terminal(demo, cwd=here, env=env) as terminal:
        terminal.wait_for(r"SIMULATION", within=60)
        terminal.wait_for(r"ml-team/pretrain-llama ", within=180)
        table_after = time.monotonic() - started
        terminal.wait_for(r"Ctrl-C stops everything", within=240)
        played_out = time.monotonic() - started
        screen = terminal.text

        # The live table was redrawn as the jobs moved (a terminal, not a final print).
        drawn = phases_drawn(screen, "eval-sweep")
        assert drawn[-1] == "COMPLETE", drawn
        assert "PENDING" in drawn and "RUNNING" in drawn, drawn
        assert drawn.index("PENDING") < drawn.index("RUNNING") < drawn.index("COMPLETE")
        assert phases_drawn(screen, "broken-tokenizer")[-1] == "FAILED"
        assert phases_drawn(screen, "chat")[-1] == "READY"

        # What to try next names the scenario's workloads and the scientist's commands.
        kaiwo = ".venv/bin/kaiwo"
        commands = try_next(screen)
        assert commands == [
            f"{kaiwo} submit -f {EXAMPLE} --wait",
            f"{kaiwo} list",
            f"{kaiwo} status ml-team/eval-sweep",
            f"{kaiwo} logs ml-team/broken-tokenizer",
            f"{kaiwo} queues",
            f"{kaiwo} events explain ml-team/broken-tokenizer",
            f"{kaiwo} events tail",
        ]
        outputs: dict[str, str] = {}
        for command in commands[:-1]:  # events tail runs until Ctrl-C
            code, output = run(command, cwd=here, env=env)
            assert code == 0, f"{command}:\n{output}"
            outputs[command.removeprefix(f"{kaiwo} ")] = output

        submitted = outputs[f"submit -f {EXAMPLE} --wait"]
        assert re.search(rf"KaiwoJob {SUBMITTED}: COMPLETE\s*$", submitted, re.MULTILINE), submitted
        # Everyone's (no CLI config names "me"); NAMESPACE KIND NAME USER QUEUE PHASE AGE.
        rows = {row.split()[2]: row.split()[:6] for row in outputs["list"].splitlines()[1:]}
        assert rows["llama-3-8b-sft"] == [
            "ml-team",
            "KaiwoJob",
            "llama-3-8b-sft",
            "alice@example.com",
            "team-nlp",
            "COMPLETE",
        ]
        assert rows["broken-tokenizer"][5] == "FAILED"
        assert rows["chat"][1:2] + rows["chat"][5:] == ["KaiwoService", "READY"]
        waited = outputs["status ml-team/eval-sweep"]
        assert "Phase:     COMPLETE" in waited and "Queue:     research" in waited, waited
        broken_log = outputs["logs ml-team/broken-tokenizer"].splitlines()
        assert "FileNotFoundError: /workload/tokenizer.json" in broken_log, broken_log
        assert re.fullmatch(r"\[sandbox\] exited with code 1 after \d+ s", broken_log[-1])
        queues = outputs["queues"]
        assert "team-nlp" in queues and "research" in queues, queues
        explained = outputs["events explain ml-team/broken-tokenizer"]
        assert "broken-tokenizer" in explained and "plan" in explained, explained
        # A KaiwoService's pods (a Deployment's) have logs too: it says it serves.
        code, served = run(f"{kaiwo} logs ml-team/chat --tail 1", cwd=here, env=env)
        assert code == 0, served
        assert re.fullmatch(
            r"\[sandbox\] (ready: serving until the pod is deleted|still serving after [\d.]+ s)",
            served.strip(),
        ), served
        # The kubectl line as printed, with the kubeconfig it exports (the built stack's kubectl).
        kubeconfig = re.search(r"export KUBECONFIG=(\S+)", screen)
        assert kubeconfig is not None
        code, by_kubectl = run(
            f"{stack_program('kubectl')} logs -n ml-team -l kaiwo.silogen.ai/name=broken-tokenizer",
            cwd=here,
            env={**env, "KUBECONFIG": kubeconfig.group(1)},
        )
        assert code == 0, by_kubectl
        assert "FileNotFoundError: /workload/tokenizer.json" in by_kubectl.splitlines()

        # The job the second shell submitted, with no flags.
        code, status = run(f"{kaiwo} status {SUBMITTED}", cwd=here, env=env)
        assert code == 0 and "Phase:     COMPLETE" in status and "Queue:     team-nlp" in status
        code, explained = run(f"{kaiwo} events explain {SUBMITTED}", cwd=here, env=env)
        assert code == 0 and "llama-3-8b-sft" in explained, explained
        code, logged = run(f"{kaiwo} logs {SUBMITTED}", cwd=here, env=env)
        assert code == 0, logged
        # Several pods (the download's and the workers'): each line names its pod/container.
        prefixed = re.findall(r"^\[(llama-3-8b-sft[\w-]*)/(\w[\w-]*)\] (.*)$", logged, re.M)
        assert len({pod for pod, _, _ in prefixed}) >= 2, logged
        done = re.compile(r"\[sandbox\] done after \d+ s: exit code 0")
        assert any(done.fullmatch(line) for *_, line in prefixed), logged
        container = prefixed[-1][1]
        code, last = run(f"{kaiwo} logs {SUBMITTED} -c {container} --tail 1", cwd=here, env=env)
        assert code == 0, last
        assert all(line.endswith("exit code 0") for line in last.splitlines()), last

        if cluster == "fake":
            # On the fake only, to keep CI shorter: the real API server's pods/log with
            # follow is tested by tests/integration/test_sandbox_logs.py.
            follow_a_job_from_submission(here, env=env, kaiwo=kaiwo)

        terminal.type_ctrl_c()
        assert terminal.wait(within=120) == 0, terminal.text[-3000:]
    print(
        f"demo --cluster {cluster}: live table after {table_after:.1f} s, scenario over "
        f"after {played_out:.1f} s, the whole test {time.monotonic() - started:.1f} s"
    )


def follow_a_job_from_submission(here: Path, *, env: dict[str, str], kaiwo: str) -> None:
    """logs -f waits for the job's containers, follows the download and then the workers,
    and ends when the job does; status -w reprints it as it changes and ends at COMPLETE."""
    manifest = followed_manifest(here)
    code, output = run(f"{kaiwo} submit -f {manifest.name}", cwd=here, env=env)
    assert code == 0, output
    environment = {**env, "COLUMNS": "200"}
    follow = subprocess.Popen(
        shlex.split(f"{kaiwo} logs -f {FOLLOWED}"),
        cwd=here,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watch = subprocess.Popen(
        shlex.split(f"{kaiwo} status {FOLLOWED} -w"),
        cwd=here,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    followed_out, followed_err = follow.communicate(timeout=180)
    watched_out, watched_err = watch.communicate(timeout=180)
    assert follow.returncode == 0, followed_out + followed_err
    followed = re.findall(r"^\[(sft-followed[\w-]*)/[\w-]+\] (.*)$", followed_out, re.M)
    pods = sorted({pod for pod, _ in followed})
    assert any("download" in pod for pod in pods) and len(pods) >= 2, followed_out
    worker = next(pod for pod in pods if "download" not in pod)
    worker_lines = [line for pod, line in followed if pod == worker]
    assert worker_lines[2:5] == [
        "[sandbox] 25% of the planned 12 s",
        "[sandbox] 50% of the planned 12 s",
        "[sandbox] 75% of the planned 12 s",
    ], followed_out
    assert watch.returncode == 0, watched_out + watched_err
    reports = watched_out.split("\n---\n")
    # It changed while watched. How many reports it saw first depends on how soon the
    # process started on a loaded machine (it once missed PENDING), so only >= 2.
    assert len(reports) >= 2, watched_out
    assert "Phase:     COMPLETE" in reports[-1]
    assert "Phase:     COMPLETE" not in reports[0]
