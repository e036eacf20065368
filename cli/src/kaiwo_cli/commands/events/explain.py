"""``kaiwo events explain``: a workload's story as a tree: each observation, the plan it caused,
what the executor did, monitor findings and preemptions."""

from __future__ import annotations

import shutil
import textwrap
from datetime import UTC, datetime
from typing import Annotated, Final

import typer
from kaiwo_eventstore.explain import (
    causal_forest,
    describe,
    earlier_note,
    find_workload,
    tree_lines,
    workload_events,
)

from kaiwo_cli.commands.events.store_access import (
    StateDirOption,
    StoreOption,
    name_the_cluster,
    opened_store,
    run_coroutine,
    store_url,
)

EXPLAIN_WIDTH: Final = 120
"""Columns to wrap ``explain`` at when the output is no terminal and COLUMNS is unset."""


def explain(
    workload: Annotated[
        str,
        typer.Argument(
            help="The workload, as NAMESPACE/NAME (the newest of that name; "
            "KaiwoJob/NAMESPACE/NAME or KaiwoService/NAMESPACE/NAME when both kinds had it), "
            "one of its children as KIND/NAMESPACE/NAME (Job/ml-team/train-download), or its "
            "uid."
        ),
    ],
    store: StoreOption = None,
    state_dir: StateDirOption = None,
) -> None:
    """How a workload got where it is: observations, plans, results and preemptions.

    Exit 1 when the store recorded no such workload (or the name as two kinds: say which);
    2 when the store cannot be read.
    """
    name_the_cluster(store, state_dir)
    run_coroutine(_explain(workload, store_url(store, state_dir)))


async def _explain(reference: str, url: str) -> None:
    async with opened_store(url) as store:
        identity = await find_workload(store, reference)
        events = await workload_events(store, identity.uid)
    title = (
        f"{identity.kind} {identity.namespace}/{identity.name} (uid {identity.uid}) — "
        f"{len(events)} recorded events"
    )
    if identity.via:
        title = f"{identity.via} belongs to {title}"
    width = shutil.get_terminal_size((EXPLAIN_WIDTH, 24)).columns
    lines = tree_lines(
        title,
        causal_forest(events),
        label=lambda event: f"{_clock(event.time)}  {describe(event)}",
        width=width,
    )
    note = earlier_note(identity)
    typer.echo("\n".join([*lines, *(textwrap.wrap(note, width=width) if note else [])]))


def _clock(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
