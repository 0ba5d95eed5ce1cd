"""Alembic migrations of the SQL store, applied programmatically when a store is opened.

To add one, copy the newest file in ``versions/``, set ``revision`` and ``down_revision``,
write ``upgrade()`` and ``downgrade()`` and change :mod:`muster.store.schema` to match;
``tests/store/test_migrations.py`` fails while the two disagree.
"""
