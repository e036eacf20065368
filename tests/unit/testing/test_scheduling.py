"""How ``make test`` shares the suite between its workers (``tests/scheduling.py``): the whole
stack's files on one worker, one start of the stack, the heaviest files first."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.scheduling import WHOLE_STACK_GROUP, scope_of

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("nodeid", "scope"),
    [
        ("tests/test_a.py::test_one", "tests/test_a.py"),
        ("tests/test_a.py::TestKind::test_one[real_stack]", "tests/test_a.py"),
        ("tests/real_stack/test_a.py::test_one", "tests/real_stack/test_a.py"),
        ("tests/test_real_stack.py::test_one", WHOLE_STACK_GROUP),
        ("tests/console/test_console_real_stack.py::TestKind::test_one[x]", WHOLE_STACK_GROUP),
    ],
)
def test_a_test_goes_with_the_whole_stacks_group_or_else_its_file(nodeid: str, scope: str) -> None:
    assert scope_of(nodeid) == scope


def run_pytest(
    directory: Path, files: dict[str, str], *, workers: int = 2
) -> subprocess.CompletedProcess[str]:
    """A suite of ``files`` run as ``make test`` runs the project's, with the plugin."""
    for name, text in files.items():
        (directory / name).write_text(textwrap.dedent(text))
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "STARTS": str(directory / "starts"),
        "RUNS": str(directory / "runs"),
    }
    environment.pop("PYTEST_ADDOPTS", None)
    command = [sys.executable, "-m", "pytest", "-p", "tests.scheduling", "-p", "no:cacheprovider"]
    # Its own temporary directory: pytest's numbered ones beside this run's are not its.
    command += ["-q", "--basetemp", str(directory / "basetemp")]
    if workers:
        command += ["-n", str(workers), "--dist", "loadgroup", "--no-loadscope-reorder"]
    return subprocess.run(
        command,
        cwd=directory,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


SUITE = {
    "pytest.ini": """
        [pytest]
        markers = slow: takes more than a few seconds
    """,
    "conftest.py": """
        import os
        import pytest

        @pytest.fixture(scope="session")
        def real_stack():
            worker = os.environ.get("PYTEST_XDIST_WORKER", "none")
            with open(os.environ["STARTS"], "a") as starts:
                starts.write(worker + "\\n")
            yield
            with open(os.environ["RUNS"], "a") as runs:
                runs.write(f"{worker} stopped\\n")

        @pytest.fixture(autouse=True)
        def record(request):
            with open(os.environ["RUNS"], "a") as runs:
                worker = os.environ.get("PYTEST_XDIST_WORKER", "none")
                runs.write(f"{worker} {request.node.nodeid.partition('::')[0]}\\n")
    """,
    # Most tests, so xdist's own order (the most tests first) would run it first.
    "test_a_units.py": "".join(f"def test_unit_{n}():\n    pass\n" for n in range(12)),
    "test_b_real_stack.py": """
        def test_in_the_stack(real_stack):
            pass

        def test_beside_it_in_the_same_file():
            pass
    """,
    "test_c_slow.py": """
        import pytest

        @pytest.mark.slow
        def test_slow():
            pass
    """,
    "test_d_real_stack.py": """
        def test_in_the_stack_too(real_stack):
            pass
    """,
}
WEIGHT = {
    "test_b_real_stack.py": 0,
    "test_d_real_stack.py": 0,
    "test_c_slow.py": 1,
    "test_a_units.py": 3,
}


# Each run starts a pytest and its two workers: seconds, a minute on a loaded machine.
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_workers_run_the_whole_stacks_files_on_one_start_heaviest_first(
    tmp_path: Path,
) -> None:
    done = run_pytest(tmp_path, SUITE)
    starts, runs = tmp_path / "starts", tmp_path / "runs"
    assert done.returncode == 0, done.stdout + done.stderr
    assert "16 passed" in done.stdout, done.stdout

    ran = [line.split() for line in runs.read_text().splitlines()]
    stack_workers = {worker for worker, path in ran if WEIGHT.get(path) == 0}
    assert len(stack_workers) == 1, ran
    assert starts.read_text().splitlines() == list(stack_workers)
    for worker in {worker for worker, _ in ran}:
        on_it = [path for each, path in ran if each == worker]
        if worker in stack_workers:
            # The stack's three tests, its stop, then whatever else the worker was given.
            assert [WEIGHT.get(path) for path in on_it[:4]] == [0, 0, 0, None], ran
            on_it = on_it[4:]
        weights = [WEIGHT[path] for path in on_it]
        assert weights == sorted(weights), (worker, ran)
        assert 0 not in weights, ran


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_one_process_runs_the_same_order_and_stops_the_stack_after_its_last_test(
    tmp_path: Path,
) -> None:
    done = run_pytest(tmp_path, SUITE, workers=0)
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [
        path for _, path in (line.split() for line in (tmp_path / "runs").read_text().splitlines())
    ]
    assert ran == [
        "test_b_real_stack.py",
        "test_b_real_stack.py",
        "test_d_real_stack.py",
        "stopped",
        "test_c_slow.py",
        *["test_a_units.py"] * 12,
    ]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_file_of_the_whole_stack_not_named_so_is_refused_by_name(tmp_path: Path) -> None:
    suite = {**SUITE, "test_e_misnamed.py": SUITE["test_d_real_stack.py"]}
    done = run_pytest(tmp_path, suite)
    assert done.returncode != 0
    refusal = "test_e_misnamed.py has tests of the whole real stack, so its name must hold"
    assert refusal in done.stdout, done.stdout + done.stderr
    assert "16 passed, 1 error" in done.stdout, done.stdout
    assert "test_e_misnamed.py" not in (tmp_path / "runs").read_text()
