"""``kaiwo events replay``: re-run the pure planner over the recorded observations and check
every recorded plan is reproduced byte for byte (exit 1 when one differs)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated, Final

import typer
from kaiwo_eventstore.explain import (
    earlier_note,
    find_workload,
    short_plan_id,
)
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

from kaiwo_cli.commands.events.store_access import (
    StateDirOption,
    StoreOption,
    name_the_cluster,
    opened_store,
    run_coroutine,
    stdout_console,
    store_url,
)
from kaiwo_cli.replay.comparison import PlanReplay, ReplayReport
from kaiwo_cli.replay.processes import (
    ReplayProcessError,
    default_processes,
    replay_in_processes,
)
from kaiwo_cli.replay.store import replay_from_store


def replay(
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            help="NAMESPACE/NAME (the newest of that name; KaiwoJob/NAMESPACE/NAME or "
            "KaiwoService/NAMESPACE/NAME when both kinds had it) or a workload's uid; every "
            "recorded plan when omitted.",
        ),
    ] = None,
    fresh_contexts: Annotated[
        bool,
        typer.Option(
            "--fresh-contexts",
            help="Work every value out afresh for each plan (slower; also finds a value the "
            "planner kept when it should have worked it out again).",
        ),
    ] = False,
    processes: Annotated[
        int | None,
        typer.Option(
            "--processes",
            "-j",
            min=1,
            help="Replay processes, each judging the plans of one span of the store (each "
            "also holds the whole cluster). Default: one per core it may use (a CPU limit "
            "counts), at most 4; one with --workload.",
        ),
    ] = None,
    store: StoreOption = None,
    state_dir: StateDirOption = None,
) -> None:
    """Re-plan from the recorded observations; exit 1 when a recorded plan is not reproduced."""
    name_the_cluster(store, state_dir)
    console = stdout_console()
    url = store_url(store, state_dir)
    say = partial(_print_verdict, console)
    count = 1 if workload else (processes or default_processes())
    report: ReplayReport
    if count == 1:
        # replay's exit 1 says a plan was not reproduced (a CI gate reads it so): a mistyped
        # --workload must not look like that, so it stays 2 (decision 0141).
        report = run_coroutine(
            _replay(workload, url, say, fresh_contexts=fresh_contexts), workload_not_found=2
        )
    else:
        run_coroutine(_check_opens(url))  # one clear line when it does not, before any fork
        try:
            report = replay_in_processes(
                url, processes=count, on_verdict=say, fresh_contexts=fresh_contexts
            )
        except ReplayProcessError as error:
            console.print(f"[red]{escape(str(error))}[/]")
            raise typer.Exit(2) from None
    total = report.reproduced + report.differ + report.skipped
    console.print(
        f"{total} plans, {report.reproduced} reproduced, {report.differ} differ, "
        f"{report.skipped} skipped ({report.observations} observations replayed)"
    )
    if report.late_observations:
        console.print(
            f"[yellow]{report.late_observations} observations were recorded after the replay "
            "had passed their stream sequence and were not applied[/]"
        )
    if report.differ:
        raise typer.Exit(1)


_MARKS: Final = {"reproduced": ("reproduced", "32"), "differs": ("differs", "31")}
_SKIPPED: Final = ("skipped", "33")
_NO_CONTROL_CHARACTERS: Final = dict.fromkeys([*range(0x20), 0x7F])
"""Recorded text is a claim, not terminal output: no escape sequence of it reaches the screen."""


def _print_verdict(console: Console, plan: PlanReplay) -> None:
    """One line per plan as it is judged (a large store prints as it goes, keeping none).

    Written to the console's file directly, coloured with one ANSI code when the console
    has colours: rich's ``print`` took 0.47 ms a line (markup, wrapping, control codes), a
    quarter of a replay that prints ten thousand plans."""
    word, colour = _MARKS.get(plan.outcome, _SKIPPED)
    mark = f"\x1b[{colour}m{word}\x1b[0m" if console.color_system else word
    reason = f": {plan.reason}" if plan.reason else ""
    line = (
        f"{plan.owner}  plan {short_plan_id(plan.event_id)} "
        f"({plan.trigger}, obs {plan.obs_sequence}){reason}"
    ).translate(_NO_CONTROL_CHARACTERS)
    console.file.write(f"{mark}  {line}\n")
    if plan.diff:
        console.print(Syntax(plan.diff, "diff", theme="ansi_dark", background_color="default"))


async def _check_opens(url: str) -> None:
    async with opened_store(url):
        pass


async def _replay(
    reference: str | None,
    url: str,
    on_verdict: Callable[[PlanReplay], None],
    *,
    fresh_contexts: bool,
) -> ReplayReport:
    async with opened_store(url) as store:
        identity = await find_workload(store, reference) if reference else None
        note = earlier_note(identity) if identity else None
        if note:
            typer.echo(f"kaiwo events: {note}", err=True)
        uid = identity.uid if identity else None
        return await replay_from_store(
            store,
            workload_uid=uid,
            on_verdict=on_verdict,
            keep=lambda _plan: False,
            fresh_contexts=fresh_contexts,
        )
