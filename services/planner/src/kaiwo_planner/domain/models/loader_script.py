"""The adapter-loader sidecar's script, as the text the adapters ConfigMap carries.

The script is part of this package (:mod:`kaiwo_planner.sidecars.adapter_loader`, standard
library only, so the model-loader image runs it as it is); the plan ships it to each Model's
Pods. It is read once, when this module is imported, like code: it is a constant of the
planner's version, and so of the plans it makes.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Final

ADAPTER_LOADER_SCRIPT: Final = (
    files("kaiwo_planner.sidecars").joinpath("adapter_loader.py").read_text(encoding="utf-8")
)
