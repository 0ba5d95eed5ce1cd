"""The revision counter, the objects table and the change log.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "revision",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.Column("compacted", sa.BigInteger(), nullable=False),
    )
    op.bulk_insert(
        sa.table("revision", sa.column("id"), sa.column("value"), sa.column("compacted")),
        [{"id": 1, "value": 0, "compacted": 0}],
    )
    op.create_table(
        "objects",
        sa.Column("kind", sa.String(63), primary_key=True),
        sa.Column("namespace", sa.String(63), primary_key=True),
        sa.Column("name", sa.String(253), primary_key=True),
        sa.Column("uid", sa.String(36), nullable=False, unique=True),
        sa.Column("resource_version", sa.BigInteger(), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("labels", sa.Text(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
    )
    op.create_table(
        "changes",
        sa.Column("revision", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("type", sa.String(8), nullable=False),
        sa.Column("kind", sa.String(63), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
    )
    op.create_index("ix_changes_kind_revision", "changes", ["kind", "revision"])


def downgrade() -> None:
    op.drop_index("ix_changes_kind_revision", table_name="changes")
    op.drop_table("changes")
    op.drop_table("objects")
    op.drop_table("revision")
