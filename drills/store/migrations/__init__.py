"""The history store's Alembic migrations (see README.md beside this file)."""
