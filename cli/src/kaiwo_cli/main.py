"""The ``kaiwo`` command: one typer app; each command lives in ``kaiwo_cli.commands``."""

from __future__ import annotations

import typer

from kaiwo_cli.commands import apply, asyncapi, crds, events, nats, plan, up, validate, version

app = typer.Typer(
    name="kaiwo",
    help="Kaiwo: AI/GPU workloads on Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
)
app.command("validate")(validate.validate)
app.command("crds")(crds.crds)
app.command("asyncapi")(asyncapi.asyncapi)
app.command("version")(version.version)
app.command("up")(up.up)
app.command("demo")(__import__("kaiwo_cli.commands.demo", fromlist=["demo"]).demo)
app.command("apply")(apply.apply)
app.command("plan")(plan.plan)
app.add_typer(events.app, name="events")
app.add_typer(nats.app, name="nats")

if __name__ == "__main__":
    app()
