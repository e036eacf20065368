"""The plans of the configuration objects: a Warning Event on a KaiwoConfig or an
AIMNamespaceConfig that the operator cannot use as written, and nothing else (decision 0206).

Neither kind has a status subresource, so an Event on the object itself is where
``kubectl describe kaiwoconfig kaiwo`` and ``kubectl get events`` show what is wrong. The plan
of such an object carries that one Event: no desired objects, no prune rules, no status (the
executor writes none when the plan has none, and refuses one for these kinds).

* **KaiwoConfig ``kaiwo``** the models refuse (a malformed quantity or duration, a value out
  of range: what the CRD's schema cannot say): workloads are planned with the defaults
  (:func:`~kaiwo_planner.domain.settings.cluster_settings.kaiwo_config`, decision 0008) and
  the monitor skips its ticks (no findings, no preemption: a typo must not preempt under
  settings nobody chose); the Event (reason ``InvalidConfig``) names each field and rule and
  says so. A KaiwoConfig of
  another name is never read: no plan.
* **AIMNamespaceConfig** the models refuse: it is ignored (the first valid one by name in
  its namespace is in force); the Event says so. One that parses but gives names its
  children cannot use
  (:func:`~kaiwo_planner.domain.settings.namespace_config_names.namespace_config_name_problems`):
  the Event names each of its fields and the rule; the children get the names as written, as
  before (a typo in a config must not roll or prune what runs, decision 0206).
* A valid object: no plan (nothing to say, nothing to undo: an Event is never withdrawn).

Level-triggered and settled: the plan is the same for the same version of the object (its
generation and what people wrote in it, ``Plan.sources``), so the planner publishes it once
(an equal fingerprint is no news) and the executor emits its Event once per fingerprint and
reason, as for every plan. An edit that leaves the object invalid makes a new plan, and a new
Event; a fixed object makes none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from kaiwo_contracts.crds.config_v1alpha1 import AIMNamespaceConfig, KaiwoConfig
from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KAIWO_CONFIG_NAME
from kaiwo_contracts.events.observed import oversized_marker
from kaiwo_contracts.plans import EventIntent, ObjectRef, Plan
from kaiwo_contracts.validation import Problem
from pydantic import BaseModel, ValidationError

from kaiwo_planner.domain.settings.namespace_config_names import namespace_config_name_problems
from kaiwo_planner.domain.state.first_few import first_few
from kaiwo_planner.domain.status.invalid_owner import (
    MAX_MESSAGE_LENGTH,
    MAX_MESSAGE_PROBLEMS,
    observed_version,
    spec_problems,
)

REASON_INVALID_CONFIG: Final = "InvalidConfig"


def plan_kaiwo_config(owner: Mapping[str, Any]) -> Plan | None:
    """The plan of a KaiwoConfig (wire form): its Event when it is ``kaiwo`` and invalid."""
    if _metadata(owner).get("name") != KAIWO_CONFIG_NAME:
        return None
    problems = _model_problems(owner, KaiwoConfig)
    if not problems:
        return None
    message = (
        f"The KaiwoConfig {KAIWO_CONFIG_NAME!r} is invalid, so until it is fixed workloads "
        "are planned with the defaults and the monitor judges no GPU use (no findings, no "
        f"preemption): {_listed(problems)}"
    )
    return _event_plan(owner, message)


def plan_namespace_config(owner: Mapping[str, Any]) -> Plan | None:
    """The plan of an AIMNamespaceConfig (wire form): its Event when it is invalid or gives
    names its children cannot use."""
    namespace = str(_metadata(owner).get("namespace") or "")
    problems = _model_problems(owner, AIMNamespaceConfig)
    if problems:
        message = (
            "The AIMNamespaceConfig is invalid, so it is ignored (none of its settings reach "
            f"the workloads and Models of namespace {namespace!r}) until it is fixed: "
            f"{_listed(problems)}"
        )
        return _event_plan(owner, message)
    names = namespace_config_name_problems(AIMNamespaceConfig.model_validate(owner))
    if not names:
        return None
    message = (
        "The AIMNamespaceConfig gives names the children of the workloads and Models of "
        f"namespace {namespace!r} cannot use (the API server refuses such a child, or no "
        "Secret or Gateway can be so named); they are passed on as written until fixed: "
        f"{_listed(names)}"
    )
    return _event_plan(owner, message)


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


def _event_plan(owner: Mapping[str, Any], message: str) -> Plan:
    generation, resource_version = observed_version(owner)
    return Plan(
        owner=ObjectRef.of(owner),
        observed_generation=generation,
        observed_resource_version=resource_version,
        events=(
            EventIntent(
                type="Warning", reason=REASON_INVALID_CONFIG, message=message[:MAX_MESSAGE_LENGTH]
            ),
        ),
    )


def _metadata(owner: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = owner.get("metadata")
    return meta if isinstance(meta, Mapping) else {}
