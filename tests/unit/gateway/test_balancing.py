"""LeastLoad and PrefixHash (CHWBL): spreading, stickiness and the load bound."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from kaiwo_gateway.domain.balancing import Balancer, HashRing, bounded_capacity
from kaiwo_gateway.domain.catalog import Endpoint

A = Endpoint(key="ns/a", address="10.0.0.1:8000", adapters=frozenset({"sql"}))
B = Endpoint(key="ns/b", address="10.0.0.2:8000")


def test_least_load_splits_evenly_then_rebalances_after_adapter_traffic() -> None:
    balancer = Balancer()
    chosen = [
        balancer.choose(group="m", endpoints=(A, B), strategy="LeastLoad") for _ in range(100)
    ]
    assert sum(c is not None and c.endpoint == A for c in chosen) == 50

    for _ in range(50):
        choice = balancer.choose(group="m", endpoints=(A, B), strategy="LeastLoad", adapter="sql")
        assert choice is not None and choice.endpoint == A
    plain = [balancer.choose(group="m", endpoints=(A, B), strategy="LeastLoad") for _ in range(52)]

    assert [c.endpoint.key for c in plain if c is not None].count("ns/b") == 51
    assert balancer.in_flight("m") == {"ns/a": 101, "ns/b": 101}


def test_least_load_takes_turns_when_requests_finish_at_once() -> None:
    balancer = Balancer()
    order = []
    for _ in range(4):
        choice = balancer.choose(group="m", endpoints=(A, B), strategy="LeastLoad")
        assert choice is not None
        order.append(choice.endpoint.key)
        balancer.release(group="m", endpoint=choice.endpoint.key)

    assert order == ["ns/a", "ns/b", "ns/a", "ns/b"]
    assert balancer.in_flight("m") == {}


def test_an_endpoint_that_joins_takes_turns_with_those_there_and_not_every_turn() -> None:
    # A scale up from one replica to two, under sequential requests (each finishes before
    # the next): A has served 10 alone; B joins counting as 10 too, so the ties alternate
    # (A first, by key). Started at 0, B would have taken all the next 10.
    balancer = Balancer()

    def sequential(endpoints: tuple[Endpoint, ...], count: int) -> list[str]:
        order = []
        for _ in range(count):
            choice = balancer.choose(group="m", endpoints=endpoints, strategy="LeastLoad")
            assert choice is not None
            order.append(choice.endpoint.key)
            balancer.release(group="m", endpoint=choice.endpoint.key)
        return order

    assert sequential((A,), 10) == ["ns/a"] * 10
    assert sequential((A, B), 6) == ["ns/a", "ns/b", "ns/a", "ns/b", "ns/a", "ns/b"]

    # B leaves and C joins while A and B have 13 each: C starts at the fewest, 13.
    c = Endpoint(key="ns/c", address="10.0.0.3:8000")
    assert sequential((A, c), 4) == ["ns/a", "ns/c", "ns/a", "ns/c"]


def test_an_adapter_no_endpoint_has_finds_none_and_excluded_endpoints_are_skipped() -> None:
    balancer = Balancer()

    assert balancer.choose(group="m", endpoints=(B,), strategy="LeastLoad", adapter="sql") is None
    choice = balancer.choose(group="m", endpoints=(A, B), strategy="LeastLoad", exclude={"ns/a"})
    assert choice is not None and choice.endpoint == B


def test_prefix_hash_keeps_a_prefix_on_one_endpoint_while_it_is_idle() -> None:
    balancer = Balancer()
    endpoints = tuple(Endpoint(key=f"ns/p{i}", address=f"10.0.0.{i}:8000") for i in range(5))
    seen = set()
    for _ in range(20):
        choice = balancer.choose(
            group="m",
            endpoints=endpoints,
            strategy="PrefixHash",
            prefix="You are a helpful",
            replication=20,
        )
        assert choice is not None
        seen.add(choice.endpoint.key)
        balancer.release(group="m", endpoint=choice.endpoint.key)

    assert len(seen) == 1


def test_prefix_hash_spills_over_when_the_bound_is_reached() -> None:
    # Two endpoints, factor 1.25, nothing finishes: the bound after the n-th request is
    # ceil(1.25 * n / 2) = 1, 2, 2, 3, 4, 4: the hot endpoint takes the 1st, 2nd, 4th and
    # 5th request, the other the 3rd and the 6th.
    balancer = Balancer()
    keys = [
        choice.endpoint.key
        for choice in (
            balancer.choose(
                group="m",
                endpoints=(A, B),
                strategy="PrefixHash",
                prefix="same prompt",
                mean_load_factor=125,
            )
            for _ in range(6)
        )
        if choice is not None
    ]
    hot, cold = keys[0], keys[2]

    assert hot != cold
    assert keys == [hot, hot, cold, hot, hot, cold]


def test_the_ring_has_replication_points_per_endpoint_and_walks_all_of_them() -> None:
    ring = HashRing.build(["ns/a", "ns/b"], replication=3)

    assert len(ring.points) == 6
    assert list(ring.points) == sorted(ring.points)
    assert sorted(ring.walk("anything")) == ["ns/a"] * 3 + ["ns/b"] * 3


def test_the_bound_is_the_mean_after_the_request_times_the_factor_rounded_up() -> None:
    assert bounded_capacity(total=0, endpoints=2, mean_load_factor=125) == 1
    assert bounded_capacity(total=9, endpoints=4, mean_load_factor=150) == 4  # 15/4 = 3.75
    assert bounded_capacity(total=7, endpoints=2, mean_load_factor=100) == 4


operations = st.lists(
    st.one_of(
        st.tuples(st.just("request"), st.text(max_size=12)),
        st.tuples(st.just("finish"), st.integers(min_value=0, max_value=7)),
    ),
    max_size=120,
)


@settings(max_examples=150, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=8),
    replication=st.integers(min_value=1, max_value=30),
    factor=st.integers(min_value=100, max_value=300),
    steps=operations,
)
def test_prefix_hash_never_puts_more_than_the_bound_on_one_endpoint(
    count: int, replication: int, factor: int, steps: list[tuple[str, object]]
) -> None:
    endpoints = tuple(Endpoint(key=f"ns/p{i}", address=f"10.0.0.{i}:8000") for i in range(count))
    balancer = Balancer()
    for operation, argument in steps:
        loads = balancer.in_flight("m")
        if operation == "finish":
            busy = sorted(loads)
            if busy:
                balancer.release(group="m", endpoint=busy[int(str(argument)) % len(busy)])
            continue
        total = sum(loads.values())
        choice = balancer.choose(
            group="m",
            endpoints=endpoints,
            strategy="PrefixHash",
            prefix=str(argument),
            replication=replication,
            mean_load_factor=factor,
        )
        assert choice is not None and not choice.fallback
        after = balancer.in_flight("m")
        mean = (total + 1) / count
        assert after[choice.endpoint.key] <= math.ceil(factor / 100 * mean - 1e-9)
        assert sum(after.values()) == total + 1
