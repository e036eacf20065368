"""Fuzzing ``kaiwo validate``: manifests of every served kind, drawn from the models' CRD
schemas (:mod:`tests.fuzz.schema_strategies`) and, most of the time, damaged.

Properties:

* :func:`validate_manifest` raises nothing; it gives an empty list exactly when the kind's
  model takes the manifest, and otherwise problems that each say what is wrong and name a
  field of the manifest (or the whole document);
* the command itself, on the manifest written as a YAML file, exits 0 (valid) or 1 (problems,
  or a file it cannot read) and prints no traceback.

Cases: 1,000 per target in CI, 100,000 with ``make fuzz`` (:mod:`tests.fuzz.profiles`).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from kaiwo_cli.main import app
from kaiwo_contracts.crds.registry import SERVED_KINDS, model_for
from kaiwo_contracts.validation import validate_manifest
from pydantic import ValidationError

from tests.fuzz.profiles import PROFILE
from tests.fuzz.schema_strategies import hostile, manifests

MANIFESTS = {model: manifests(model) for model in SERVED_KINDS}  # built once: building is costly
runner = CliRunner()


@st.composite
def documents(draw: st.DrawFn) -> tuple[Any, bool]:
    """A manifest and whether it is the undamaged one drawn from the schema."""
    model = draw(st.sampled_from(SERVED_KINDS))
    manifest = draw(MANIFESTS[model])
    if draw(st.integers(min_value=0, max_value=3)) == 0:
        return manifest, True
    return draw(hostile(manifest)), False


def _starts_at(path: str, field: str) -> bool:
    return path == field or path.startswith((f"{field}.", f"{field}["))


@PROFILE
@given(documents())
def test_validation_gives_problems_naming_fields_and_nothing_else(
    drawn: tuple[Any, bool],
) -> None:
    document, undamaged = drawn

    problems = validate_manifest(document)

    for problem in problems:
        assert problem.message.strip(), problem
        if problem.path:
            # The path starts at a field of the manifest (or one the manifest must have).
            assert isinstance(document, Mapping)
            top = {str(key) for key in document} | {"apiVersion", "kind", "metadata", "spec"}
            assert any(_starts_at(problem.path, field) for field in top), problem
    if undamaged:
        model = model_for(document["apiVersion"], document["kind"])
        assert model is not None
        try:
            model.model_validate_json(json.dumps(document), strict=True)
        except ValidationError:
            assert problems
        else:
            assert problems == []


def _yaml_text(document: Any) -> str | None:
    try:
        return yaml.safe_dump(document, allow_unicode=True)
    except (yaml.YAMLError, ValueError):  # a value YAML cannot write (a frozenset, a surrogate)
        return None


@PROFILE
@given(documents())
def test_the_command_exits_0_or_1_without_a_traceback(drawn: tuple[Any, bool]) -> None:
    document, _ = drawn
    text = _yaml_text(document)
    if text is None:
        return
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "manifest.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")

        result = runner.invoke(app, ["validate", "-f", str(path)])

    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    if result.exit_code == 0:
        assert result.output.strip().endswith("document(s) valid")
    else:
        assert (
            "invalid" in result.output
            or "unreadable" in result.output
            or ("no manifests found" in result.output)
        )
