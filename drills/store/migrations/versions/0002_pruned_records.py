"""Pruned records: what `drills db prune` removed, each with the content hash it was sealed
with, so the evidence chain still verifies after a prune.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 16:26:42.278297

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the pruned_records table."""
    op.create_table(
        "pruned_records",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("plan", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("record_key", sa.String(length=160), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column("prune_seq", sa.Integer(), nullable=False),
        sa.Column("pruned_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("pruned_records", schema=None) as batch_op:
        batch_op.create_index("ix_pruned_plan_seq", ["plan", "prune_seq"], unique=False)


def downgrade() -> None:
    """Drop the pruned_records table."""
    with op.batch_alter_table("pruned_records", schema=None) as batch_op:
        batch_op.drop_index("ix_pruned_plan_seq")
    op.drop_table("pruned_records")
