"""Sign-in failures: the dashboard's failed sign-ins counted per user name and per client
address, so that the lockout holds across sessions and server restarts.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 01:00:00.000000

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the sign_in_failures table."""
    op.create_table(
        "sign_in_failures",
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("locked_until", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("subject"),
    )


def downgrade() -> None:
    """Drop the sign_in_failures table."""
    op.drop_table("sign_in_failures")
