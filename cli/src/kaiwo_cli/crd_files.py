"""The CRD YAML files ``make crds`` writes to ``deploy/k8s/crds/``: names and exact text."""

from __future__ import annotations

from typing import Any

import yaml
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions

HEADER = "# Generated from the pydantic models by `make crds` (kaiwo crds); do not edit.\n"


class _BlockStyleDumper(yaml.SafeDumper):
    """Writes multi-line strings (descriptions) as ``|`` blocks, so the files read well."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockStyleDumper.add_representer(str, _represent_str)


def crd_file_name(crd: dict[str, Any]) -> str:
    """``<group>_<plural>.yaml``, as controller-gen names them."""
    spec = crd["spec"]
    return f"{spec['group']}_{spec['names']['plural']}.yaml"


def render_yaml(document: dict[str, Any]) -> str:
    """One document as YAML, keys sorted, so the output is the same on every run."""
    return yaml.dump(
        document,
        Dumper=_BlockStyleDumper,
        sort_keys=True,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )


def generated_crds() -> dict[str, str]:
    """File name -> file text of every served kind's CRD, sorted by file name."""
    files = {
        crd_file_name(crd): HEADER + render_yaml(crd)
        for crd in custom_resource_definitions(SERVED_KINDS)
    }
    return dict(sorted(files.items()))


def multi_document_yaml() -> str:
    """Every CRD in one multi-document YAML stream."""
    return "".join(f"---\n{render_yaml(crd)}" for crd in custom_resource_definitions(SERVED_KINDS))
