"""Evidence checkpoints: each plan's chain head (length, hash), signed, at a run's end,
a readiness batch and a prune, so that a chain cut short or rewritten shows against the
copies kept outside the store.

A store that had no chain yet gets it in `drills db upgrade` (drills.store.schema), never
on open: from this revision on, a store without its chain has been tampered with.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 01:00:00.000000

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the evidence_checkpoints table."""
    op.create_table(
        "evidence_checkpoints",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("plan", sa.String(length=128), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.Column("head_sha256", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("keyid", sa.String(length=64), nullable=True),
        sa.Column("signature", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("evidence_checkpoints", schema=None) as batch_op:
        batch_op.create_index("ix_checkpoint_plan_length", ["plan", "length"], unique=False)


def downgrade() -> None:
    """Drop the evidence_checkpoints table."""
    with op.batch_alter_table("evidence_checkpoints", schema=None) as batch_op:
        batch_op.drop_index("ix_checkpoint_plan_length")
    op.drop_table("evidence_checkpoints")
