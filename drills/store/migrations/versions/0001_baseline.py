"""Baseline: the schema of drills 0.1.0, the last release made without migrations.

Stores that release wrote (no alembic_version table) are stamped at this revision by
`drills db upgrade` after it has made sure they hold every table and index listed here.

Revision ID: 0001
Revises: (none)
Create Date: 2026-12-01 15:30:46.273989

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create every table of drills 0.1.0."""
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("who", sa.String(length=256), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("plan", sa.String(length=128), nullable=False),
        sa.Column("accepted", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "drill_runs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("plan", sa.String(length=128), nullable=False),
        sa.Column("plan_digest", sa.String(length=80), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("operator", sa.String(length=128), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("t0", sa.DateTime(timezone=True), nullable=True),
        sa.Column("restored_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("rto_seconds", sa.Float(), nullable=True),
        sa.Column("client_rto_seconds", sa.Float(), nullable=True),
        sa.Column("rpo_seconds", sa.JSON(), nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=True),
        sa.Column("timeline", sa.JSON(), nullable=False),
        sa.Column("readiness", sa.JSON(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("flow_run_id", sa.String(length=64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_run_finished", "drill_runs", ["finished_at"], unique=False)
    op.create_index(
        "ix_run_plan_mode_started", "drill_runs", ["plan", "mode", "started_at"], unique=False
    )
    op.create_index("ix_run_plan_started", "drill_runs", ["plan", "started_at"], unique=False)
    op.create_index("ix_run_started", "drill_runs", ["started_at"], unique=False)

    op.create_table(
        "evidence_chain",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("plan", sa.String(length=128), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("record_key", sa.String(length=160), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("label", sa.String(length=300), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column("prev_sha256", sa.String(length=64), nullable=False),
        sa.Column("entry_sha256", sa.String(length=64), nullable=False),
        sa.Column("pre_chain", sa.Boolean(), nullable=False),
        sa.Column("chained_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("plan", "seq", name="ux_chain_plan_seq"),
    )
    op.create_index("ix_chain_run", "evidence_chain", ["run_id"], unique=False)

    op.create_table(
        "evidence_meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "journal",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("step", sa.String(length=128), nullable=False),
        sa.Column("target", sa.String(length=256), nullable=False),
        sa.Column("original", sa.JSON(), nullable=False),
        sa.Column("intended", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_journal_run_seq", "journal", ["run_id", "seq"], unique=True)

    op.create_table(
        "leases",
        sa.Column("plan", sa.String(length=128), nullable=False),
        sa.Column("holder", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("plan"),
    )
    op.create_table(
        "readiness_snapshots",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("plan", sa.String(length=128), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("blocking", sa.Integer(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_snapshot_plan_time", "readiness_snapshots", ["plan", "checked_at"], unique=False
    )


def downgrade() -> None:
    """Drop them all: an empty store (their indexes go with them)."""
    for table in (
        "readiness_snapshots",
        "leases",
        "journal",
        "evidence_meta",
        "evidence_chain",
        "drill_runs",
        "audit_log",
    ):
        op.drop_table(table)
