"""Alembic environment: runs on the connection :func:`muster.store.migrate.upgrade` passes in.

The caller owns the transaction (and the lock that keeps two starting servers from migrating
at once), so no alembic.ini and no engine are needed here.
"""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
