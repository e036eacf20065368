"""The one ``eventually`` of the tests: what counts as "not yet", what it returns, how it fails."""

from __future__ import annotations

import pytest

from tests.waiting import NotConvergedError, Pending, eventually, eventually_blocking


def answers_after(polls: int, answer: object, *, meanwhile: object = None) -> object:
    """A check that answers ``meanwhile`` for ``polls`` polls, then ``answer``."""
    seen: list[int] = []

    def check() -> object:
        seen.append(1)
        return answer if len(seen) > polls else meanwhile

    return check


@pytest.mark.parametrize("meanwhile", [None, False, Pending("starting")])
async def test_none_false_and_pending_mean_not_yet(meanwhile: object) -> None:
    check = answers_after(3, {"phase": "Running"}, meanwhile=meanwhile)
    assert await eventually(check, interval=0) == {"phase": "Running"}


async def test_a_coroutine_function_is_awaited_and_an_empty_answer_is_an_answer() -> None:
    async def check() -> list[str]:
        return []

    assert await eventually(check) == []


async def test_a_condition_that_never_holds_fails_quoting_where_things_stood() -> None:
    with pytest.raises(NotConvergedError, match=r"the pod runs: not within 0.2 s \(Pending\)"):
        await eventually(lambda: Pending("Pending"), what="the pod runs", within=0.2)


def test_the_blocking_twin_waits_the_same_way() -> None:
    assert eventually_blocking(answers_after(2, 7), interval=0) == 7
    with pytest.raises(AssertionError, match=r"the condition: not within 0\.1 s$"):
        eventually_blocking(lambda: False, within=0.1, interval=0.01)
