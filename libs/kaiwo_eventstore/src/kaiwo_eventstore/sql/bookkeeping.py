"""What the SQL event store keeps beside the events: each consumer's position, and the one
cluster the store records."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from kaiwo_eventstore.events import Tracking
from kaiwo_eventstore.sql.connections import SqlConnections
from kaiwo_eventstore.sql.schema import consumer_positions, store_cluster


async def upsert_position(
    connections: SqlConnections, connection: AsyncConnection, tracking: Tracking
) -> None:
    """Record ``tracking`` inside the caller's write transaction (an append's, or its own)."""
    statement = connections.insert(consumer_positions).values(
        consumer=tracking.consumer, global_position=tracking.position
    )
    await connection.execute(
        statement.on_conflict_do_update(
            index_elements=[consumer_positions.c.consumer],
            set_={"global_position": statement.excluded.global_position},
        )
    )


class SqlPositions:
    """Consumer positions (``consumer_positions``)."""

    def __init__(self, connections: SqlConnections) -> None:
        self._connections = connections

    async def save_position(self, consumer: str, position: int) -> None:
        async with self._connections.writing() as connection:
            await upsert_position(self._connections, connection, Tracking(consumer, position))

    async def position(self, consumer: str) -> int:
        statement = sa.select(consumer_positions.c.global_position).where(
            consumer_positions.c.consumer == consumer
        )
        async with self._connections.reading() as connection:
            found = (await connection.execute(statement)).scalar_one_or_none()
        return int(found) if found is not None else 0


class SqlClusterBinding:
    """The identity of the cluster the store records (``store_cluster``), set once."""

    def __init__(self, connections: SqlConnections) -> None:
        self._connections = connections

    async def cluster(self) -> str | None:
        async with self._connections.reading() as connection:
            found = (await connection.execute(sa.select(store_cluster.c.cluster_uid))).first()
        return str(found[0]) if found is not None else None

    async def bind_cluster(self, identity: str) -> str:
        async with self._connections.writing() as connection:
            found = (await connection.execute(sa.select(store_cluster.c.cluster_uid))).first()
            if found is not None:
                return str(found[0])
            # Replicas of one recorder starting together record the same identity once.
            await connection.execute(
                self._connections.insert(store_cluster)
                .values(cluster_uid=identity)
                .on_conflict_do_nothing()
            )
        return identity
