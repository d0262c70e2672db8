"""Incident proposals: an alert matching a plan's declare_on, held for an operator to
approve (never started on its own), with the alerts that proposed it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 08:00:00.000000

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the incident_proposals and proposal_alerts tables."""
    op.create_table(
        "incident_proposals",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("plan", sa.String(length=128), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("detected_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("group_key", sa.Text(), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.String(length=256), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("flow_run_id", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_proposal_plan_state", "incident_proposals", ["plan", "state"])
    op.create_table(
        "proposal_alerts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("proposal_id", sa.String(length=32), nullable=False),
        sa.Column("plan", sa.String(length=128), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("alertname", sa.String(length=256), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("annotations", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("plan", "fingerprint", "starts_at", name="ux_proposal_alert"),
    )
    op.create_index("ix_proposal_alert_proposal", "proposal_alerts", ["proposal_id"])


def downgrade() -> None:
    """Drop the proposal tables."""
    op.drop_index("ix_proposal_alert_proposal", table_name="proposal_alerts")
    op.drop_table("proposal_alerts")
    op.drop_index("ix_proposal_plan_state", table_name="incident_proposals")
    op.drop_table("incident_proposals")
