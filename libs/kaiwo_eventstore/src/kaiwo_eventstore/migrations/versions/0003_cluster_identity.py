"""The cluster a store's events come from (decision 0042): one row, written once.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-28

A store filled from one cluster must not take in another's events (``kaiwo events explain``
would tell one cluster's story for a name the other also has). The recorder records the
identity (the uid of kube-system) the first time it knows it, and refuses a store that
records another. A store made before this revision records none until then.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "store_cluster",
        sa.Column("cluster_uid", sa.Text(), primary_key=True),
    )


def downgrade() -> None:
    op.drop_table("store_cluster")
