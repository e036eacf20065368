"""Which configuration object a kept (not applied) change of a running child comes from.

A running child keeps what it cannot take (decisions 0117, 0123, 0131), and
``ChildSpecApplied`` names the paths kept. Many of those changes are not the user's: an
AIMNamespaceConfig gives every pod its pull secrets and ``HF_TOKEN``, the KaiwoConfig the
scheduler name, the GPU toleration and the default image. Named bare, such a path read as
something changed in the workload's own spec, and the user looked in the wrong place.

There is no history of what the configuration was when the child was made, so a kept path is
attributed by where its *field* comes from now (decision 0144):

* an item of ``env`` named as a variable only the namespace gives (``HF_TOKEN`` unless the
  workload's ``spec.env`` sets it), or of ``imagePullSecrets`` not in the workload's own
  list, is the AIMNamespaceConfig's when changed or added; one dropped (nothing gives it
  now) came from that config or from the workload's spec before an edit, and both are named;
* ``schedulerName`` with the KaiwoConfig's scheduler name, a toleration of the KaiwoConfig's
  GPU taint key, and a main container's ``image`` that is the KaiwoConfig's default image of
  a workload that names none, are the KaiwoConfig's;
* anything else is the workload's own spec (named bare, as before).

Pure, and only asked of the paths a child keeps.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kaiwo_contracts.crds.config_v1alpha1 import AIMNamespaceConfig, KaiwoConfig

from kaiwo_planner.domain.settings.namespace_config import HF_TOKEN_ENV
from kaiwo_planner.domain.settings.workload_inputs import ChildDefaults, WorkloadInputs
from kaiwo_planner.domain.state.manifest_comparison import contains

NAMESPACE_CONFIG = "AIMNamespaceConfig"
CLUSTER_CONFIG = "KaiwoConfig"


@dataclass(frozen=True, slots=True)
class ConfigurationSource:
    """A configuration object a child's fields come from: ``name`` is None when there is none
    now (deleted, or no longer valid), ``namespace`` for a namespaced kind."""

    kind: str
    name: str | None
    namespace: str = ""

    def cause(self, child_kind: str, *, dropped: bool = False) -> str:
        """How a kept path from this source is told: "from AIMNamespaceConfig team-a/tenant,
        changed since the Job was made".

        ``dropped``: the path names an item the child holds and nothing gives now. It came
        from this source or from the workload's own spec, which no longer says (there is no
        history), so both are named rather than one guessed."""
        named = f"{self.namespace}/{self.name}" if self.namespace else self.name
        if dropped:
            if self.name is None:
                none_now = f": namespace {self.namespace} has none now" if self.namespace else ""
                return f"given by neither the workload's spec nor an {self.kind} any more{none_now}"
            return f"given by neither the workload's spec nor {self.kind} {named} any more"
        if self.name is None:
            where = f" of namespace {self.namespace}" if self.namespace else ""
            return f"from the {self.kind}{where}, gone since the {child_kind} was made"
        return f"from {self.kind} {named}, changed since the {child_kind} was made"


@dataclass(frozen=True, slots=True)
class ConfigurationOrigins:
    """What of a workload's children its configuration gives rather than its own spec."""

    namespace_config: ConfigurationSource
    cluster_config: ConfigurationSource
    namespace_env: frozenset[str] = frozenset()
    """Variables only the namespace's config gives (not set by the workload's ``spec.env``)."""
    own_pull_secrets: frozenset[str] = frozenset()
    """The workload's own pull secrets: any other comes from the namespace's config."""
    scheduler_name: str = ""
    gpu_toleration_keys: tuple[str, ...] = ()
    default_image: str | None = None
    """The KaiwoConfig's default image, when the workload names no image of its own."""


def configuration_origins(
    inputs: WorkloadInputs,
    defaults: ChildDefaults,
    *,
    namespace_config: AIMNamespaceConfig | None,
    config: KaiwoConfig | None,
) -> ConfigurationOrigins:
    """The origins of the configured parts of the children of the workload of ``inputs``."""
    namespace = inputs.identity.namespace
    in_force = namespace_config is not None and (
        (namespace_config.metadata.namespace or namespace) == namespace
    )
    own_env = {variable.get("name") for variable in inputs.env}
    return ConfigurationOrigins(
        namespace_config=ConfigurationSource(
            NAMESPACE_CONFIG,
            (namespace_config.metadata.name or "") if in_force and namespace_config else None,
            namespace,
        ),
        cluster_config=ConfigurationSource(
            CLUSTER_CONFIG, (config.metadata.name or "") if config is not None else None
        ),
        namespace_env=frozenset({HF_TOKEN_ENV} - own_env),
        own_pull_secrets=frozenset(inputs.image_pull_secrets),
        scheduler_name=defaults.scheduler_name,
        gpu_toleration_keys=defaults.gpu_toleration_keys,
        default_image=None if inputs.image else defaults.default_ray_image,
    )


def kept_paths_text(
    paths: Sequence[str],
    *,
    desired: Mapping[str, Any],
    observed: Mapping[str, Any],
    origins: ConfigurationOrigins,
    kind: str,
    shown: int | None = None,
) -> str:
    """``paths`` (kept on the ``observed`` child of ``kind`` against ``desired``) as a
    message lists them: the workload's own first, as they are; then, after "; ", those of
    each configuration object followed by the cause, "(from ..., changed since the Job was
    made)" ("each from" for several). With ``shown``, only that many paths are named (the
    workload's own first), and " and N more" says how many are not."""
    own: list[str] = []
    configured: dict[tuple[ConfigurationSource, bool], list[str]] = {}
    for path in paths:
        cause = cause_of(path, desired=desired, observed=observed, origins=origins)
        if cause is None:
            own.append(path)
        else:
            configured.setdefault(cause, []).append(path)
    left = len(paths) if shown is None else shown
    groups: list[str] = []
    if own[:left]:
        groups.append(", ".join(own[:left]))
    left -= len(own[:left])
    for (source, dropped), group in configured.items():
        named = group[:left]
        left -= len(named)
        if named:
            each = "each " if len(named) > 1 else ""
            told = source.cause(kind, dropped=dropped)
            groups.append(f"{', '.join(named)} ({each}{told})")
    more = len(paths) - (len(paths) if shown is None else min(shown, len(paths)))
    return "; ".join(groups) + (f" and {more} more" if more > 0 else "")


_TOKEN = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[name=([^\]]*)\]")
_MISSING = object()


@dataclass(frozen=True, slots=True)
class _Place:
    """Where a path leads in the desired and observed child: the named items and keys it
    crosses, and the values at its end (``_MISSING`` where it leaves the object, or could not
    be followed)."""

    items: tuple[tuple[str, str, bool], ...]
    """The named items it crosses: (list key, item name, dropped from the desired list)."""
    keys: tuple[str, ...]
    entered: tuple[tuple[str, Any], ...]
    """Each list item the path goes into by index: (list key, the desired item)."""
    desired: Any
    observed: Any


def _place(path: str, desired: Any, observed: Any) -> _Place:
    items: list[tuple[str, str, bool]] = []
    keys: list[str] = []
    entered: list[tuple[str, Any]] = []
    list_key = ""
    for match in _TOKEN.finditer("." + path):
        key, index, name = match.groups()
        if key is not None:
            list_key = key
            keys.append(key)
            desired = desired.get(key, _MISSING) if isinstance(desired, Mapping) else _MISSING
            observed = observed.get(key, _MISSING) if isinstance(observed, Mapping) else _MISSING
        elif index is not None:
            desired = _item(desired, int(index))
            observed = _item(observed, int(index))
            entered.append((list_key, desired))
            item_name = desired.get("name") if isinstance(desired, Mapping) else None
            if isinstance(item_name, str):
                items.append((list_key, item_name, False))
        else:  # dropped from the desired list: only the observed one holds it
            items.append((list_key, name, True))
            desired = _MISSING
            observed = next(
                (i for i in _list(observed) if isinstance(i, Mapping) and i.get("name") == name),
                _MISSING,
            )
    return _Place(tuple(items), tuple(keys), tuple(entered), desired, observed)


def _item(value: Any, index: int) -> Any:
    return value[index] if isinstance(value, list) and index < len(value) else _MISSING


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def cause_of(
    path: str,
    *,
    desired: Mapping[str, Any],
    observed: Mapping[str, Any],
    origins: ConfigurationOrigins,
) -> tuple[ConfigurationSource, bool] | None:
    """The configuration object the kept ``path`` comes from, and whether it names only
    items dropped (nothing gives them now); None: the workload's own spec."""
    place = _place(path, desired, observed)
    for list_key, name, dropped in place.items:
        if _namespace_gives(list_key, name, origins):
            return origins.namespace_config, dropped
    last = place.keys[-1] if place.keys else ""
    if last in ("env", "imagePullSecrets") and not place.items:
        asked, dropped_names = _changed_names(place.desired, place.observed)
        changed = asked | dropped_names
        if changed and all(_namespace_gives(last, name, origins) for name in changed):
            return origins.namespace_config, not asked
    if _from_cluster_config(place, last, origins):
        return origins.cluster_config, False
    return None


def _namespace_gives(list_key: str, name: str, origins: ConfigurationOrigins) -> bool:
    if list_key == "env":
        return name in origins.namespace_env
    if list_key == "imagePullSecrets":
        return name not in origins.own_pull_secrets
    return False


def _changed_names(desired: Any, observed: Any) -> tuple[set[str], set[str]]:
    """The names of the items of a named list that differs as a whole: those asked and not
    held as asked, and those held and no longer asked (dropped)."""
    wanted, held = _list(desired), _list(observed)
    asked = {
        item.get("name")
        for item in wanted
        if isinstance(item, Mapping) and not any(contains(seen, item) for seen in held)
    }
    all_asked = {item.get("name") for item in wanted if isinstance(item, Mapping)}
    dropped = {item.get("name") for item in held if isinstance(item, Mapping)} - all_asked
    return (
        {name for name in asked if isinstance(name, str)},
        {name for name in dropped if isinstance(name, str) and name},
    )


def _from_cluster_config(place: _Place, last: str, origins: ConfigurationOrigins) -> bool:
    if last == "schedulerName":
        return bool(origins.scheduler_name) and place.desired == origins.scheduler_name
    if last == "image" and "containers" in place.keys:
        return origins.default_image is not None and place.desired == origins.default_image
    if "tolerations" in place.keys and origins.gpu_toleration_keys:
        if last == "tolerations":  # the list differs as a whole: the items added to it
            added = [
                t
                for t in _list(place.desired)
                if not any(contains(seen, t) for seen in _list(place.observed))
            ]
        else:  # within one toleration
            added = [item for list_key, item in place.entered if list_key == "tolerations"]
        return bool(added) and all(
            isinstance(t, Mapping) and t.get("key") in origins.gpu_toleration_keys for t in added
        )
    return False
