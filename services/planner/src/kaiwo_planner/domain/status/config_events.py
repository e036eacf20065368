"""The plans of the configuration objects: a Warning Event on a KaiwoConfig or an
AIMNamespaceConfig that the operator cannot use as written, or that is not in force, and
nothing else (decisions 0206 and 0209).

Neither kind has a status subresource, so an Event on the object itself is where
``kubectl describe kaiwoconfig kaiwo`` and ``kubectl get events`` show what is wrong. The plan
of such an object carries that one Event: no desired objects, no prune rules, no status (the
executor writes none when the plan has none, and refuses one for these kinds).

* **KaiwoConfig ``kaiwo``** the models refuse (a malformed quantity or duration, a value out
  of range: what the CRD's schema cannot say): workloads are planned with the defaults
  (:func:`~kaiwo_planner.domain.settings.cluster_settings.kaiwo_config`, decision 0008) and
  the monitor skips its ticks (no findings, no preemption: a typo must not preempt under
  settings nobody chose); the Event (reason ``InvalidConfig``) names each field and rule and
  says so. A KaiwoConfig of another name is never read: the Event (reason ``NotInForce``)
  says so and where its settings belong (decision 0209).
* **AIMNamespaceConfig**, in this order:

  1. the models refuse it: it is ignored (the first valid one by name in its namespace is in
     force); the Event (``InvalidConfig``) says so and names each field;
  2. it parses, but another AIMNamespaceConfig of its namespace is in force (one before it
     by name): none of its settings reach the namespace's workloads and Models while that
     one exists; the Event (reason ``NotInForce``) names the one in force and says how to
     put this one in force (decision 0209). Its names are not checked while it is not in
     force: they reach no child;
  3. it is in force and gives names its children cannot use
     (:func:`~kaiwo_planner.domain.settings.namespace_config_names.namespace_config_name_problems`):
     the Event (``InvalidConfig``) names each of its fields and the rule; the children get
     the names as written, as before (a typo in a config must not roll or prune what runs,
     decision 0206);
  4. it is in force and has credential entries no download item or Model can get
     (:func:`~kaiwo_planner.domain.settings.namespace_config.unused_credential_entries`: a
     second GCS or Azure Blob entry, an entry that names no Secret): the same Event names
     each entry and why (decision 0233).

  Which one is in force is the caller's to say (``in_force``, read from the cluster state by
  :func:`~kaiwo_planner.domain.settings.cluster_settings.namespace_config_object`): this
  module reads no state. A ``NotInForce`` plan was computed from that other object too, and
  says so (:attr:`NamespaceConfigPlan.also_read`), so that its sources name it.
* A valid object in force: no plan (nothing to say, nothing to undo: an Event is never
  withdrawn).

Level-triggered and settled: the plan is the same for the same version of the object (its
generation and what people wrote in it, ``Plan.sources``) and, for ``NotInForce``, of the one
in force, so the planner publishes it once (an equal fingerprint is no news) and the executor
emits its Event once per fingerprint and reason, as for every plan. An edit that leaves the
object invalid makes a new plan, and a new Event; a fixed object makes none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kaiwo_contracts.crds.config_v1alpha1 import AIMNamespaceConfig, KaiwoConfig
from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KAIWO_CONFIG_NAME
from kaiwo_contracts.events.observed import oversized_marker
from kaiwo_contracts.plans import EventIntent, ObjectRef, Plan
from kaiwo_contracts.validation import Problem
from pydantic import BaseModel, ValidationError

from kaiwo_planner.domain.settings.namespace_config import unused_credential_entries
from kaiwo_planner.domain.settings.namespace_config_names import namespace_config_name_problems
from kaiwo_planner.domain.state.first_few import first_few
from kaiwo_planner.domain.status.invalid_owner import (
    MAX_MESSAGE_LENGTH,
    MAX_MESSAGE_PROBLEMS,
    observed_version,
    spec_problems,
)

REASON_INVALID_CONFIG: Final = "InvalidConfig"
REASON_NOT_IN_FORCE: Final = "NotInForce"


@dataclass(frozen=True, slots=True)
class NamespaceConfigPlan:
    """An AIMNamespaceConfig's plan (None: nothing to say), and the other configuration
    objects it was computed from (the one in force, for a ``NotInForce`` plan), which its
    sources name besides the object itself."""

    plan: Plan | None
    also_read: tuple[Mapping[str, Any], ...] = ()


def plan_kaiwo_config(owner: Mapping[str, Any]) -> Plan | None:
    """The plan of a KaiwoConfig (wire form): its Event when it is ``kaiwo`` and invalid, or
    when it has another name (never read)."""
    name = str(_metadata(owner).get("name") or "")
    if not name:  # no object the API server holds: nothing to tell
        return None
    if name != KAIWO_CONFIG_NAME:
        message = (
            f"Only the KaiwoConfig named {KAIWO_CONFIG_NAME!r} is read, so this one ({name!r}) "
            f"changes nothing: put its settings in the KaiwoConfig {KAIWO_CONFIG_NAME!r} "
            "(kubectl edit kaiwoconfig kaiwo) and delete this one"
        )
        return _event_plan(owner, message, reason=REASON_NOT_IN_FORCE)
    problems = _model_problems(owner, KaiwoConfig)
    if not problems:
        return None
    message = (
        f"The KaiwoConfig {KAIWO_CONFIG_NAME!r} is invalid, so until it is fixed workloads "
        "are planned with the defaults and the monitor judges no GPU use (no findings, no "
        f"preemption): {_listed(problems)}"
    )
    return _event_plan(owner, message)


def plan_namespace_config(
    owner: Mapping[str, Any], *, in_force: Mapping[str, Any] | None
) -> NamespaceConfigPlan:
    """The plan of an AIMNamespaceConfig (wire form): its Event when it is invalid, not in
    force, or in force and gives names its children cannot use. ``in_force``: the
    AIMNamespaceConfig in force in its namespace (wire form), or None."""
    namespace = str(_metadata(owner).get("namespace") or "")
    problems = _model_problems(owner, AIMNamespaceConfig)
    if problems:
        message = (
            "The AIMNamespaceConfig is invalid, so it is ignored (none of its settings reach "
            f"the workloads and Models of namespace {namespace!r}) until it is fixed: "
            f"{_listed(problems)}"
        )
        return NamespaceConfigPlan(_event_plan(owner, message))
    if in_force is not None and ObjectRef.key_of(in_force) != ObjectRef.key_of(owner):
        other = str(_metadata(in_force).get("name") or "")
        message = (
            f"Another AIMNamespaceConfig of namespace {namespace!r}, {other!r}, is in force "
            "(the first valid one by name), so none of this one's settings reach the "
            "workloads and Models of the namespace while it exists: keep one "
            f"AIMNamespaceConfig per namespace, or delete {other!r} to put this one in force"
        )
        return NamespaceConfigPlan(
            _event_plan(owner, message, reason=REASON_NOT_IN_FORCE), also_read=(in_force,)
        )
    config = AIMNamespaceConfig.model_validate(owner)
    names = namespace_config_name_problems(config)
    unused = unused_credential_entries(config)
    told: list[str] = []
    if names:
        told.append(
            "The AIMNamespaceConfig gives names the children of the workloads and Models of "
            f"namespace {namespace!r} cannot use (the API server refuses such a child, or no "
            "Secret or Gateway can be so named); they are passed on as written until fixed: "
            f"{_listed(names)}"
        )
    if unused:
        told.append(
            "The AIMNamespaceConfig has credential entries no download item or Model of "
            f"namespace {namespace!r} can get; remove them, or put the one to use first: "
            f"{_listed(unused)}"
        )
    if not told:
        return NamespaceConfigPlan(None)
    # One Event: the executor names a plan's Events by its fingerprint and reason.
    return NamespaceConfigPlan(_event_plan(owner, ". ".join(told)))


def _model_problems(owner: Mapping[str, Any], model: type[BaseModel]) -> list[Problem]:
    """What the models refuse in ``owner`` (as the planner's own parse of it does)."""
    oversized = oversized_marker(owner)
    if oversized is not None:
        return [
            Problem(
                "",
                f"the object is {oversized.size_bytes:,} bytes as JSON, more than the "
                f"{oversized.limit_bytes:,} bytes a message on the operator's event bus may "
                "carry, so only its metadata was observed",
            )
        ]
    try:
        model.model_validate(owner)
    except ValidationError as error:
        return spec_problems(owner, error)
    except (TypeError, ValueError) as error:
        return [Problem("spec", str(error))]
    return []


def _listed(problems: Sequence[Problem]) -> str:
    return first_few(
        [str(p) for p in problems], shown=MAX_MESSAGE_PROBLEMS, separator="; ", and_more="; and "
    )


def _event_plan(
    owner: Mapping[str, Any], message: str, *, reason: str = REASON_INVALID_CONFIG
) -> Plan:
    generation, resource_version = observed_version(owner)
    return Plan(
        owner=ObjectRef.of(owner),
        observed_generation=generation,
        observed_resource_version=resource_version,
        events=(EventIntent(type="Warning", reason=reason, message=message[:MAX_MESSAGE_LENGTH]),),
    )


def _metadata(owner: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = owner.get("metadata")
    return meta if isinstance(meta, Mapping) else {}
