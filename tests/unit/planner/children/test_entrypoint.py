"""spec.entrypoint -> container command (shebang aware) or Ray entrypoint."""

from __future__ import annotations

import pytest
from kaiwo_planner.domain.children.entrypoint import ray_entrypoint, shell_command


@pytest.mark.parametrize(
    ("entrypoint", "command"),
    [
        (
            "/bin/bash -c 'echo \"Hello World\"'",
            ["/bin/sh", "-c", "/bin/bash -c 'echo \"Hello World\"'"],
        ),
        (
            '#!/bin/bash\n echo "Starting"\n # a comment\n\n echo done\n',
            ["/bin/bash", "-c", ' echo "Starting"\n # a comment\n\n echo done'],
        ),
        ("#!/bin/sh\nls -la", ["/bin/sh", "-c", "ls -la"]),
        ("#!/usr/bin/env python3\nprint(1)", ["/usr/bin/env", "python3", "-c", "print(1)"]),
        (
            "  python train.py \\\n  --epochs 3  ",
            ["/bin/sh", "-c", "python train.py    --epochs 3"],
        ),
        ("#!\necho x", ["/bin/sh", "-c", "echo x"]),
    ],
)
def test_shell_command(entrypoint, command):
    assert shell_command(entrypoint) == command


def test_ray_entrypoint_is_trimmed_with_continuations_joined_and_no_shell():
    script = "\n python main.py \\\n --steps 10\nimport os\n"

    assert ray_entrypoint(script) == "python main.py   --steps 10\nimport os"
