"""``kaiwo version``: the installed version of the command."""

from __future__ import annotations

from importlib.metadata import version as installed_version

from rich.console import Console


def version() -> None:
    """Print the version of kaiwo."""
    Console().print(f"kaiwo {installed_version('kaiwo-cli')}", highlight=False)
