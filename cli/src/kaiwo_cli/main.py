"""The ``kaiwo`` command: a click group that imports a command's module only when it runs.

Every command lives in ``kaiwo_cli.commands``; the table below names its module, the attribute
holding it (a click command, a typer app or a typer-annotated function) and the one line
``kaiwo --help`` shows, so that listing the commands imports neither typer nor the Kubernetes
client, pydantic or NATS (a test keeps it so). Only the command that runs pays for what it needs.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import click


@dataclass(frozen=True, slots=True)
class CommandEntry:
    module: str
    attribute: str
    summary: str


HELP_OPTIONS = ["-h", "--help"]

COMMANDS: dict[str, CommandEntry] = {
    "submit": CommandEntry(
        "kaiwo_cli.commands.submit", "submit", "Validate and submit a KaiwoJob or KaiwoService."
    ),
    "list": CommandEntry(
        "kaiwo_cli.commands.workloads", "list_workloads", "List workloads (yours by default)."
    ),
    "status": CommandEntry(
        "kaiwo_cli.commands.workloads",
        "status",
        "A workload's phase, conditions, children, queue and Events.",
    ),
    "logs": CommandEntry("kaiwo_cli.commands.workloads", "logs", "Logs of a workload's pods."),
    "delete": CommandEntry("kaiwo_cli.commands.workloads", "delete", "Delete a workload."),
    "queues": CommandEntry(
        "kaiwo_cli.commands.capacity",
        "queues",
        "ClusterQueues with quota and usage per flavor, LocalQueues, pending workloads.",
    ),
    "nodes": CommandEntry(
        "kaiwo_cli.commands.capacity", "nodes", "GPU nodes by vendor and pool: capacity and use."
    ),
    "gpus": CommandEntry(
        "kaiwo_cli.commands.gpus",
        "gpus",
        "GPU workloads tracked for idle preemption: utilization, idle since, verdict.",
    ),
    "apply": CommandEntry(
        "kaiwo_cli.commands.apply", "apply", "Validate, then server-side apply manifests."
    ),
    "validate": CommandEntry(
        "kaiwo_cli.commands.validate", "validate", "Check manifests offline; name every bad field."
    ),
    "plan": CommandEntry("kaiwo_cli.commands.plan", "plan", "What the planner would create."),
    "events": CommandEntry(
        "kaiwo_cli.commands.events", "app", "Recorded events: tail, replay, explain, export."
    ),
    "up": CommandEntry(
        "kaiwo_cli.commands.up", "up", "Run the operator on this machine (NATS, store, services)."
    ),
    "demo": CommandEntry(
        "kaiwo_cli.commands.demo", "demo", "The operator on a simulated GPU cluster, a scenario."
    ),
    "crds": CommandEntry("kaiwo_cli.commands.crds", "crds", "The CRDs, generated from the models."),
    "asyncapi": CommandEntry(
        "kaiwo_cli.commands.asyncapi", "asyncapi", "The AsyncAPI document of the public events."
    ),
    "nats": CommandEntry("kaiwo_cli.commands.nats", "app", "NATS credentials for deployments."),
    "scheduler": CommandEntry(
        "kaiwo_cli.commands.scheduler", "app", "The kaiwo-scheduler: install it or name another."
    ),
    "version": CommandEntry("kaiwo_cli.commands.version", "version", "The version."),
}


def load_command(name: str, entry: CommandEntry) -> Any:
    """The command of ``entry``: a click command as it is (the scientist's quick commands),
    else a typer app, or a function made one."""
    target: Any = getattr(importlib.import_module(entry.module), entry.attribute)
    if isinstance(target, click.Command):
        command: Any = target
        command.name = name
        command.context_settings["help_option_names"] = HELP_OPTIONS
        command.context_settings.setdefault("max_content_width", 100)
        hide_flag_types(command)
        return command
    import typer
    import typer.main

    if not isinstance(target, typer.Typer):
        single = typer.Typer(add_completion=False)
        single.command(name)(target)
        target = single
    command = typer.main.get_command(target)
    command.name = name
    command.context_settings["help_option_names"] = HELP_OPTIONS
    hide_flag_types(command)
    return command


def hide_flag_types(command: Any) -> None:
    """Flags take no value: show no type for them (typer would print ``<bool>``)."""
    for param in command.params:
        if getattr(param, "is_flag", False):
            param.metavar = ""
    make_help_option = command.get_help_option

    def help_option(ctx: Any) -> Any:
        # click makes -h/--help per context, outside ``params``: hide its type as it appears.
        option = make_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = help_option
    for sub in (getattr(command, "commands", None) or {}).values():
        hide_flag_types(sub)


class LazyCommand(click.Command):
    """Stands for one command until it runs; then its typer command parses the rest of the
    line itself (typer carries a click of its own, so the two never share a context)."""

    def __init__(self, name: str, entry: CommandEntry, *, prog_name: str) -> None:
        super().__init__(
            name,
            help=entry.summary,
            add_help_option=False,
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        )
        self.entry = entry
        self.prog_name = prog_name

    def invoke(self, ctx: click.Context) -> Any:
        command = load_command(str(self.name), self.entry)
        return command.main(args=ctx.args, prog_name=self.prog_name)


class LazyGroup(click.Group):
    """Lists the commands of its table and imports one only when it is asked for;
    ``prog_name`` is what its usage lines start with."""

    def __init__(
        self, *args: Any, commands: dict[str, CommandEntry], prog_name: str, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.table = commands
        self.prog_name = prog_name

    def list_commands(self, ctx: click.Context) -> list[str]:  # noqa: ARG002 (click's)
        return list(self.table)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:  # noqa: ARG002
        entry = self.table.get(cmd_name)
        if entry is None:
            return None
        return LazyCommand(cmd_name, entry, prog_name=f"{self.prog_name} {cmd_name}")

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:  # noqa: ARG002
        rows = [(name, entry.summary) for name, entry in self.table.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def lazy_group(
    name: str, commands: dict[str, CommandEntry], *, help_text: str, prog_name: str
) -> LazyGroup:
    """A group of commands that imports only the one that runs (``kaiwo``, ``kaiwo events``)."""
    return LazyGroup(
        name,
        commands=commands,
        prog_name=prog_name,
        help=help_text,
        no_args_is_help=True,
        context_settings={"help_option_names": HELP_OPTIONS, "max_content_width": 100},
    )


app = lazy_group(
    "kaiwo",
    COMMANDS,
    help_text="""Kaiwo: AI/GPU workloads on Kubernetes.

    After `kaiwo up` (or `make demo`), every command finds the stack it started through its
    state directory: --state DIR, else $KAIWO_STATE, else .kaiwo here or in a parent directory.

    Exit status: 0 done; 1 invalid input, a workload that failed (submit --wait) or nothing
    to show (no such workload); 2 the cluster, the event store or NATS cannot be reached or
    refused; 3 submit --wait --timeout ran out.
    """,
    prog_name="kaiwo",
)


if __name__ == "__main__":
    app()
