"""The CRD YAML committed under deploy/k8s/crds/ is exactly what the models generate."""

from __future__ import annotations

from pathlib import Path

from kaiwo_cli.crd_files import generated_crds

CRD_DIR = Path(__file__).resolve().parents[3] / "deploy" / "k8s" / "crds"
HINT = "deploy/k8s/crds/ is out of date with the models: run `make crds` and commit the result"


def test_committed_crds_equal_the_generated_ones() -> None:
    generated = generated_crds()
    committed = {path.name: path.read_text(encoding="utf-8") for path in CRD_DIR.glob("*.yaml")}

    assert sorted(committed) == sorted(generated), HINT
    stale = [name for name, text in generated.items() if committed[name] != text]
    assert stale == [], f"{HINT} (differs: {', '.join(stale)})"


def test_every_served_kind_has_a_committed_crd() -> None:
    names = sorted(path.name for path in CRD_DIR.glob("*.yaml"))
    assert names == [
        "config.kaiwo.silogen.ai_aimnamespaceconfigs.yaml",
        "config.kaiwo.silogen.ai_kaiwoconfigs.yaml",
        "kaiwo.silogen.ai_gpuworkloads.yaml",
        "kaiwo.silogen.ai_kaiwojobs.yaml",
        "kaiwo.silogen.ai_kaiwoqueueconfigs.yaml",
        "kaiwo.silogen.ai_kaiwoservices.yaml",
        "kubeai.org_models.yaml",
    ], HINT
