"""``kaiwo plan -f MANIFEST``: what the planner would create for a manifest, offline.

Like ``helm template``: no cluster is contacted. The manifests are planned with the same
``plan_object`` the planner service runs, against a cluster state read from files:

* ``--nodes``: Node objects (as ``kubectl get nodes -o yaml`` prints them);
* ``--config``: the KaiwoConfig; ``--queue-config``: the KaiwoQueueConfig;
* ``--models-config``: the system configuration of Models, as its ConfigMap or as the bare
  ``models.yaml`` document (without it, upstream KubeAI chart's defaults);
* ``--observed``: objects that already exist (children such as the Job, Kueue Workloads,
  Namespaces, other workloads).

Every file may hold several YAML documents or a ``List``. The output is the child objects the
plan applies, one YAML document each with a ``# Source:`` comment, then the owner's status and
the Events (``-o json`` prints the plans as JSON instead).

What the files leave out is filled in the way a cluster would, and each filling is printed
as a comment: a manifest without ``metadata.uid`` gets one derived from its kind, namespace
and name (so runs are repeatable), ``generation`` 1, ``creationTimestamp`` ``--now`` and the
namespace ``default``. A Model that would run no Pods (no replicas wanted yet, or its cache
still loading) is shown once more with one replica and its cache loaded, said in the output.
Without ``--nodes``, enough 8-GPU nodes of each vendor the workloads ask for are assumed;
without a KaiwoQueueConfig, the one the operator creates at start-up, plus an open cluster
queue for every queue a workload names; without Namespace objects, every
namespace mentioned exists; a ``priorityClass`` nothing given defines is assumed to name an
existing PriorityClass. An observed object without ``ownerReferences`` belongs to the
planned workload of its namespace (when there is one); an owner reference without ``uid``
is resolved by kind and name.

Invalid input, a kind that is not served among them, is reported as ``FILE: FIELD:
PROBLEM`` and exits with status 1.

Reading the files: :mod:`kaiwo_cli.commands.plan_input`; printing the plans:
:mod:`kaiwo_cli.commands.plan_output`.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from kaiwo_planner.domain.planning import PlanningResult, plan_object
from kaiwo_planner.domain.state.planning_context import PlanningContext

from kaiwo_cli.commands.plan_input import (
    InputError,
    after_downloads,
    parse_now,
    read_cluster,
)
from kaiwo_cli.commands.plan_output import (
    as_json,
    as_yaml,
)
from kaiwo_cli.model_assumptions import later_model_plans, models_config_map
from kaiwo_cli.offline_cluster import (
    Document,
)


class OutputFormat(StrEnum):
    yaml = "yaml"
    json = "json"


def plan(
    filename: Annotated[
        Path,
        typer.Option(
            "--filename",
            "-f",
            help="The manifest(s) to plan: a YAML file or a directory; - for stdin.",
        ),
    ],
    nodes: Annotated[
        Path | None, typer.Option("--nodes", help="Node objects the cluster has.")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="The KaiwoConfig (named kaiwo).")
    ] = None,
    queue_config: Annotated[
        Path | None,
        typer.Option("--queue-config", help="The KaiwoQueueConfig (named kaiwo)."),
    ] = None,
    models_config: Annotated[
        Path | None,
        typer.Option(
            "--models-config",
            help="The system configuration of Models: its ConfigMap or a models.yaml.",
        ),
    ] = None,
    observed: Annotated[
        Path | None,
        typer.Option(
            "--observed", help="Objects that exist already (children, Kueue Workloads, ...)."
        ),
    ] = None,
    now: Annotated[
        str | None,
        typer.Option("--now", help="The time to plan at (ISO 8601); default: the current time."),
    ] = None,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="yaml (default) or json.")
    ] = OutputFormat.yaml,
) -> None:
    """Print the child objects, status and Events the planner decides for manifests, offline."""
    try:
        moment = parse_now(now)
        cluster = read_cluster(
            filename=filename,
            nodes=nodes,
            config=config,
            queue_config=queue_config,
            observed=observed,
            now=moment,
        )
        if models_config is not None:
            cluster.objects.append(models_config_map(models_config))
    except InputError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(code=1) from error
    context = PlanningContext.of(cluster.state())
    results: list[tuple[Document, PlanningResult]] = []
    for document in cluster.manifests:
        result = plan_object(owner=document.content, context=context, now=moment)
        results.append((document, result))
        downloaded = after_downloads(document, result, cluster, now=moment)
        later = (
            [downloaded]
            if downloaded is not None
            else later_model_plans(document, result, cluster.state(), now=moment)
        )
        results += [(Document(step.source, step.content), step.result) for step in later]
    if output is OutputFormat.json:
        typer.echo(as_json(results, cluster))
    else:
        typer.echo(as_yaml(results, cluster), nl=False)
