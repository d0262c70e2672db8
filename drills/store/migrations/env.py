"""Alembic's environment: the connection drills.store.schema hands over, or, for
`alembic revision --autogenerate`, the store DRILLS_DB_URL names."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from drills.store.history import database_url, make_engine
from drills.store.models import Base


def _migrate(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite cannot ALTER most things: batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


given = context.config.attributes.get("connection")
if given is not None:
    _migrate(given)
else:
    engine = make_engine(context.config.get_main_option("sqlalchemy.url") or database_url())
    with engine.connect() as connection:
        _migrate(connection)
    engine.dispose()
