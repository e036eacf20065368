"""``kaiwo events``: read what the operator saw, decided and did.

* ``tail``    — live events from NATS, optionally after the recorded ones: those that carry
  no object (public workload events, results, findings, the gateway's), which the CLI's key
  may read; ``--internal`` adds observations, plans and dead letters (``kaiwo.>``), for a
  key that may read them (a reader's, ``kaiwo nats credentials --reader``);
* ``replay``  — re-run the pure planner over the recorded observations and check every
  recorded plan of a workload is reproduced byte for byte (exit 1 when one differs);
* ``explain`` — a workload's story: each observation, the plan it caused, what the executor
  did, monitor findings and preemptions, as a tree;
* ``export``  — recorded events as CloudEvents JSON lines (structured mode) with their
  recorded positions as extension attributes.

``--store`` defaults to the event store of the stack ``kaiwo up`` started in the state
directory (``--state``, ``$KAIWO_STATE``, else ``.kaiwo`` here or in a parent directory; its
``stack.json``), else the SQLite file ``kaiwo up`` keeps there.
``tail`` connects to that stack's NATS with the CLI's own read-only identity; given
``--nats`` it connects there instead, with ``--credentials`` (an NKey seed or ``.creds``
file) and ``--tls-ca`` as needed. It never guesses a server.

One module per subcommand, imported only when it runs (``tail`` needs NATS, ``replay`` the
planner, ``explain`` neither); ``store_access`` holds what they share.
"""

from __future__ import annotations

from kaiwo_cli.main import CommandEntry, lazy_group

_HERE = "kaiwo_cli.commands.events"

COMMANDS: dict[str, CommandEntry] = {
    "explain": CommandEntry(
        f"{_HERE}.explain",
        "explain",
        "How a workload got where it is: observations, plans, results and preemptions.",
    ),
    "replay": CommandEntry(
        f"{_HERE}.replay",
        "replay",
        "Re-plan from the recorded observations; exit 1 when a recorded plan is not reproduced.",
    ),
    "export": CommandEntry(
        f"{_HERE}.export",
        "export",
        "Recorded events as JSON lines (CloudEvents structured mode) with their positions.",
    ),
    "tail": CommandEntry(f"{_HERE}.tail", "tail", "Follow events live from NATS (Ctrl-C stops)."),
}

app = lazy_group(
    "events",
    COMMANDS,
    help_text="Read the recorded events: tail, replay, explain, export.",
    prog_name="kaiwo events",
)
