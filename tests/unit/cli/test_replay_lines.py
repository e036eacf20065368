"""``kaiwo events replay`` prints one line per plan, straight to the console's file: the same
words as before, coloured only where the console has colours, and never a control character
from the recorded text (a reason is a claim, not terminal output)."""

from __future__ import annotations

import dataclasses
import io

from kaiwo_cli.commands.events.replay import _print_verdict
from kaiwo_cli.replay.comparison import PlanReplay
from rich.console import Console

PLAN = PlanReplay(
    event_id="1234abcd-0000-4000-8000-000000000000",
    position=7,
    owner="KaiwoJob/team-a/train",
    trigger="observation",
    planned_at=None,
    obs_sequence=12,
    outcome="reproduced",
)


def printed(plan: PlanReplay, *, colours: bool) -> str:
    out = io.StringIO()
    console = Console(
        file=out, force_terminal=colours, color_system="standard" if colours else None
    )
    _print_verdict(console, plan)
    return out.getvalue()


def test_a_verdict_is_one_plain_line_without_colours() -> None:
    assert printed(PLAN, colours=False) == (
        "reproduced  KaiwoJob/team-a/train  plan 1234abcd (observation, obs 12)\n"
    )


def test_on_a_terminal_the_mark_is_coloured() -> None:
    assert printed(PLAN, colours=True).startswith("\x1b[32mreproduced\x1b[0m  KaiwoJob/")


def test_no_control_character_of_a_recorded_reason_reaches_the_screen() -> None:
    hostile = dataclasses.replace(
        PLAN,
        trigger="timer",
        obs_sequence=3,
        outcome="skipped",
        reason="no plannedAt\x1b]0;owned\x07\nfake line",
    )

    assert printed(hostile, colours=False) == (
        "skipped  KaiwoJob/team-a/train  plan 1234abcd (timer, obs 3): "
        "no plannedAt]0;ownedfake line\n"
    )
