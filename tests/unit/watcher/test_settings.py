"""The watcher's settings from the environment."""

from __future__ import annotations

from pathlib import Path

from kaiwo_watcher.progress import WatcherTuning
from kaiwo_watcher.settings import WatcherSettings


def test_defaults_watch_everything(monkeypatch):
    for name in ("KAIWO_WATCH_NAMESPACES", "KAIWO_KUBECONFIG", "KAIWO_RELIST_INTERVAL_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    settings = WatcherSettings()
    assert settings.watch_namespaces == ()
    assert settings.watcher_bucket == "kaiwo-watcher"
    assert settings.kubeconfig is None
    assert settings.tuning() == WatcherTuning(
        watch_timeout=300, relist_interval=0.0, missing_kind_retry=60.0, checkpoint_every=1.0
    )


def test_environment(monkeypatch):
    monkeypatch.setenv("KAIWO_WATCH_NAMESPACES", "team-a, team-b,,")
    monkeypatch.setenv("KAIWO_KUBECONFIG", "/etc/kaiwo/kubeconfig")
    monkeypatch.setenv("KAIWO_RELIST_INTERVAL_SECONDS", "1800")
    monkeypatch.setenv("KAIWO_MISSING_KIND_RETRY_SECONDS", "15")
    settings = WatcherSettings()
    assert settings.watch_namespaces == ("team-a", "team-b")
    assert settings.kubeconfig == Path("/etc/kaiwo/kubeconfig")
    assert settings.tuning().relist_interval == 1800.0
    assert settings.tuning().missing_kind_retry == 15.0
