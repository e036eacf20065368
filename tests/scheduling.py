"""The order the suite runs in, and how ``make test``'s workers share it (a pytest plugin, see
``tests/conftest.py``).

``make test`` runs ``pytest -n 2 --dist loadgroup --no-loadscope-reorder``. Measured on two
cores, with xdist's ``--dist loadfile`` (one file to a worker at a time, the files with the
most tests handed out first), the run's wall time was lost in two places:

- each worker that met a test of the whole real stack (``real_stack``, ``tests/real_stack.py``)
  started a stack of its own: a minute of both cores, twice;
- the files of one or two tests of a minute or more each came last, since they hold the
  fewest tests, and one worker ran them while the other had nothing left.

So every file of the whole stack's tests is one group, run by one worker, and the stack stops
after the group's last test. Every other file is a group of its own, as with ``loadfile`` (its
module fixtures start once). The files run heaviest kind first (:func:`weight`), and
``--no-loadscope-reorder`` makes xdist hand them out in that order: the short files come last,
and the workers end together. Without workers (``TEST_WORKERS=0``) the order is the same, and
the stack's files still run one after another.

xdist's own ``xdist_group`` marks cannot carry the group: its worker writes the group into a
test's id in a way pytest 9 no longer reads. The group is a file's name instead, which the
controller (it collects nothing) can see: a file of the whole stack's tests has ``real_stack``
in its name, and each test of a file that does not fails, naming the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

import pytest
from xdist.scheduler import LoadScopeScheduling

WHOLE_STACK_GROUP: Final = "the-whole-real-stack"
"""The one group of every file of the whole stack's tests."""

WHOLE_STACK_NAME: Final = "real_stack"
"""What the name of every such file holds (the fixture's name)."""

_SERVER_FIXTURES: Final = frozenset({"real_cluster", "postgres_server"})


def file_of(nodeid: str) -> str:
    return nodeid.partition("::")[0]


def scope_of(nodeid: str) -> str:
    """The group a test runs in: the whole stack's, or else its file's."""
    path = file_of(nodeid)
    return WHOLE_STACK_GROUP if WHOLE_STACK_NAME in path.rpartition("/")[2] else path


def fixtures_of(item: pytest.Item) -> frozenset[str]:
    return frozenset(getattr(item, "fixturenames", ()))


def weight(path: str, items: Iterable[pytest.Item]) -> int:
    """How early a file runs, heaviest kind first: the whole stack's, a test marked ``slow``,
    a real API server, PostgreSQL or nats-server, then the rest (mostly unit tests, in
    milliseconds)."""
    if scope_of(path) == WHOLE_STACK_GROUP:
        return 0
    items = list(items)
    if any(item.get_closest_marker("slow") for item in items):
        return 1
    if any(
        item.get_closest_marker("k8s")
        or item.get_closest_marker("nats")
        or _SERVER_FIXTURES & fixtures_of(item)
        for item in items
    ):
        return 2
    return 3


_MISNAMED: Final = pytest.StashKey[frozenset[str]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files heaviest kind first, each whole."""
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(file_of(item.nodeid), []).append(item)
    config.stash[_MISNAMED] = frozenset(
        path
        for path, members in by_file.items()
        if scope_of(path) != WHOLE_STACK_GROUP
        and any(WHOLE_STACK_NAME in fixtures_of(item) for item in members)
    )
    order = {
        path: (weight(path, members), index)
        for index, (path, members) in enumerate(by_file.items())
    }
    items.sort(key=lambda item: order[file_of(item.nodeid)])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test of the whole stack in a file not named so fails before its fixtures: its worker
    would start a second stack beside the group's."""
    path = file_of(item.nodeid)
    if path in item.config.stash.get(_MISNAMED, frozenset()):
        pytest.fail(
            f"{path} has tests of the whole real stack, so its name must hold "
            f"{WHOLE_STACK_NAME!r}: tests/scheduling.py runs such files together, on one stack",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Stop the whole stack after its group's last test, not at the session's end.

    The group runs first, and the stack, idle, would take about a tenth of a core for the rest
    of the run. A later test that asks for it again starts it again."""
    yield
    if nextitem is None or scope_of(item.nodeid) != WHOLE_STACK_GROUP:
        return
    if scope_of(nextitem.nodeid) != WHOLE_STACK_GROUP:
        finish_fixture(item, WHOLE_STACK_NAME)


def finish_fixture(item: pytest.Item, name: str) -> None:
    """Tear down the session's ``name`` now, as pytest does when a parameter of it changes; the
    next test that asks for it sets it up again."""
    request = item._request  # type: ignore[attr-defined]  # pytest has no public way to this
    for fixture in item.session._fixturemanager.getfixturedefs(name, item) or ():
        fixture.finish(request)


class GroupOrFileScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """xdist's ``loadfile``, where the files of the whole stack's tests are one group."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadgroup`` gives these groups (xdist's marks would not work, see above)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return GroupOrFileScheduling(config, log)
