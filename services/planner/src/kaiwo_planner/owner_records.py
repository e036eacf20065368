"""What the planner remembers per owner between inputs: the last publication and the time
it is to be planned again."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog

from kaiwo_planner.domain.publication import Published
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.owner_key import OwnerKey
from kaiwo_planner.replan_timers import ReplanTimers

log = structlog.get_logger("kaiwo.planner")


class OwnerRecords:
    """The record of the last plan published per owner, and one pending re-plan time per
    owner uid (:class:`~kaiwo_planner.replan_timers.ReplanTimers`)."""

    def __init__(
        self,
        metrics: PlannerMetrics,
        records: dict[OwnerKey, Published] | None = None,
        timers: ReplanTimers | None = None,
    ) -> None:
        self._metrics = metrics
        self._records = records if records is not None else {}
        self.timers = timers if timers is not None else ReplanTimers()
        metrics.timers_pending.set(len(self.timers))

    def get(self, key: OwnerKey) -> Published | None:
        return self._records.get(key)

    def put(self, key: OwnerKey, record: Published) -> None:
        self._records[key] = record

    def defaults(self) -> list[OwnerKey]:
        """The default singletons with a record (plans of their creation published)."""
        return [key for key in self._records if key.is_default]

    def drop(self, key: OwnerKey) -> None:
        """Forget ``key``'s record (its timer stays)."""
        self._records.pop(key, None)

    def gone(self, uid: str) -> None:
        """The owner ``uid`` is deleted, or was never seen: nothing of it is kept."""
        self._records.pop(OwnerKey.of_uid(uid), None)
        self.timers.cancel(uid)

    def fingerprint(self, uid: str) -> str | None:
        record = self._records.get(OwnerKey.of_uid(uid))
        return record.fingerprint if record is not None else None

    def set_timer(self, uid: str, replan_at: datetime | None, *, now: datetime) -> None:
        """Plan ``uid`` again at ``replan_at`` (none: no pending time)."""
        if replan_at is None or replan_at <= now:
            if replan_at is not None:
                log.warning(
                    "planner asked to re-plan in the past; ignored", replan_at=str(replan_at)
                )
            self.timers.cancel(uid)
            return
        self.timers.arm(uid, replan_at)
        self._metrics.timers_pending.set(len(self.timers))

    def no_later_than(self, uid: str, due: datetime) -> None:
        """Plan ``uid`` at ``due`` or at the earlier time it already had."""
        earlier = self.timers.due(uid)
        self.timers.arm(uid, due if earlier is None else min(due, earlier))
        self._metrics.timers_pending.set(len(self.timers))

    def forget(self, in_partition: Callable[[str], bool]) -> None:
        """Drop the records and timers of the owners whose uid (the subject's, for a default
        singleton) ``in_partition`` accepts: another replica plans them meanwhile, so what
        this one published last says nothing about what is in force."""
        for key in [k for k in self._records if in_partition(k.subject_uid)]:
            del self._records[key]
        for uid in [u for u in self.timers.uids() if in_partition(u)]:
            self.timers.cancel(uid)
        self._metrics.timers_pending.set(len(self.timers))

    def to_document(self) -> dict[str, Any]:
        """The records in a snapshot, ordered by key."""
        keyed = {key.to_document(): record for key, record in self._records.items()}
        return {key: record.to_document() for key, record in sorted(keyed.items())}
