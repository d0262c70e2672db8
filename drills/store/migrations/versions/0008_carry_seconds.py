"""Runs record carry_seconds: until DR ran the replicas that carry target_percent of the
primary's demand, beside rto_seconds.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 11:45:00.000000

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add drill_runs.carry_seconds."""
    with op.batch_alter_table("drill_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("carry_seconds", sa.Float(), nullable=True))


def downgrade() -> None:
    """Drop drill_runs.carry_seconds."""
    with op.batch_alter_table("drill_runs", schema=None) as batch_op:
        batch_op.drop_column("carry_seconds")
