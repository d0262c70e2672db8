"""Preemption seconds: how long each drill's critical tier waited for DR's low-priority
work to give its GPUs back.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 11:20:00.000000

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add drill_runs.preemption_seconds."""
    with op.batch_alter_table("drill_runs") as batch:
        batch.add_column(sa.Column("preemption_seconds", sa.Float(), nullable=True))


def downgrade() -> None:
    """Drop drill_runs.preemption_seconds."""
    with op.batch_alter_table("drill_runs") as batch:
        batch.drop_column("preemption_seconds")
