"""The drawing in docs/architecture.md is true: every bus edge into a service is a durable
consumer that service declares, on the family its source publishes, and every consumer a
service declares is drawn."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from kaiwo_contracts.events.permissions import service_identity
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_contracts.events.subjects import Family

ARCHITECTURE: Final = Path(__file__).resolve().parents[3] / "docs" / "architecture.md"
SERVICES: Final = ("watcher", "planner", "executor", "monitor", "recorder", "gateway")
EDGE: Final = re.compile(r"(\w+) --(kaiwo\.[a-z.*>]+)--> (?=(\w+))")


def drawing() -> str:
    text = ARCHITECTURE.read_text()
    start = text.index("```") + 3
    return text[start : text.index("```", start)]


def drawn_edges() -> set[tuple[str, str, str]]:
    """(source, subject pattern, target) of every ``a --kaiwo...--> b`` between services."""
    return {
        (source, subject, target)
        for line in drawing().splitlines()
        for source, subject, target in EDGE.findall(line)
        if source in SERVICES and target in SERVICES
    }


def covers(consumer_filter: str, drawn: str) -> bool:
    """The consumer's filter and the drawn pattern name the same subjects' family and topic."""
    wanted = drawn.removesuffix(".*").removesuffix(".>")
    return consumer_filter.removesuffix(".>").removesuffix(".*") == wanted or (
        consumer_filter.startswith(f"{wanted}.")
    )


def test_the_drawing_has_the_bus_edges() -> None:
    assert drawn_edges() == {
        ("watcher", "kaiwo.obs.*", "planner"),
        ("planner", "kaiwo.plan.*", "executor"),
        ("monitor", "kaiwo.mon.utilization.*", "planner"),
        ("gateway", "kaiwo.gateway.scale.*", "planner"),
        ("executor", "kaiwo.res.*", "recorder"),
    }


def test_every_drawn_edge_is_a_declared_consumer_on_what_its_source_publishes() -> None:
    topology = bus_topology()
    for source, subject, target in drawn_edges():
        consumers = [c for c in topology.consumers if c.durable_name.startswith(f"{target}-")]
        assert any(covers(pattern, subject) for c in consumers for pattern in c.filter_subjects), (
            f"{target} declares no consumer of {subject}"
        )
        family = subject.split(".")[1]
        published = service_identity(source, topology).permissions.publish
        assert f"kaiwo.{family}.>" in published, f"{source} does not publish {subject}"


def test_every_consumer_a_service_reads_is_drawn() -> None:
    drawn = drawn_edges()
    for consumer in bus_topology().consumers:
        service = consumer.durable_name.split("-")[0]
        if service not in ("planner", "executor"):
            continue  # the recorder reads everything: "every kaiwo.> subject --> recorder"
        assert any(
            target == service and covers(pattern, subject)
            for _, subject, target in drawn
            for pattern in consumer.filter_subjects
        ), f"{consumer.durable_name} ({consumer.filter_subjects}) is not drawn"


def test_the_recorder_reads_every_family_but_those_the_drawing_leaves_out() -> None:
    line = next(line for line in drawing().splitlines() if "--> recorder -->" in line)
    said = re.fullmatch(r"every kaiwo\.> subject(?: but (?P<left_out>.+?))? --> recorder .*", line)
    assert said is not None, line
    left_out = set(said["left_out"].split(", ")) if said["left_out"] else set()
    recorded = {
        pattern
        for consumer in bus_topology().consumers
        if consumer.durable_name.startswith("recorder-")
        for pattern in consumer.filter_subjects
    }
    not_recorded = {f"kaiwo.{family}.>" for family in Family} - recorded
    assert left_out == not_recorded
    # Public events are derived from recorded observations (decision 0017), never recorded.
    assert not_recorded == {"kaiwo.public.>"}
