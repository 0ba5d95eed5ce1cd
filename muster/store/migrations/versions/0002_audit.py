"""The audit log of the API server.

Revision ID: 0002_audit
Revises: 0001
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_audit"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
        ),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("username", sa.String(253), nullable=False),
        sa.Column("verb", sa.String(32), nullable=False),
        sa.Column("resource", sa.String(253), nullable=False),
        sa.Column("namespace", sa.String(63), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("code", sa.Integer(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
    )
    op.create_index("ix_audit_time", "audit", ["time"])
    op.create_index("ix_audit_namespace_time", "audit", ["namespace", "time"])


def downgrade() -> None:
    op.drop_index("ix_audit_namespace_time", table_name="audit")
    op.drop_index("ix_audit_time", table_name="audit")
    op.drop_table("audit")
