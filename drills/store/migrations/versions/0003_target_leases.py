"""Target leases: a run leases every target its takeover touches (workloads, DNS record,
buckets) beside its plan, so two plans sharing a site never take over onto it at once.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 16:50:00.000000

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the target_leases table."""
    op.create_table(
        "target_leases",
        sa.Column("target", sa.String(length=64), nullable=False),
        sa.Column("claim", sa.Text(), nullable=False),
        sa.Column("plan", sa.String(length=128), nullable=False),
        sa.Column("holder", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("target"),
    )


def downgrade() -> None:
    """Drop the target_leases table."""
    op.drop_table("target_leases")
