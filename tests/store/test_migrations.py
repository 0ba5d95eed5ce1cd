"""The migrations build exactly the schema the code uses, and re-opening is harmless."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from muster.store import open_store
from muster.store.engine import make_engine
from muster.store.schema import metadata


def test_migrated_schema_matches_schema_module(store_url: str):
    open_store(store_url).close()
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
            assert diff == [], f"muster/store/schema.py and the migrations disagree: {diff}"
            assert set(inspect(conn).get_table_names()) == {
                "alembic_version",
                "revision",
                "objects",
                "changes",
            }
    finally:
        engine.dispose()


def test_reopening_keeps_data_and_revision(store_url: str):
    first = open_store(store_url)
    first.create({"kind": "ResourceFlavor", "metadata": {"name": "a"}, "spec": {}})
    first.close()
    again = open_store(store_url)
    try:
        assert again.revision() == 1
        assert again.get("ResourceFlavor", "a")["metadata"]["resourceVersion"] == "1"
    finally:
        again.close()


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "mysql://x@y/z"])
def test_unsupported_urls_say_what_works(url: str):
    with pytest.raises(ValueError, match="sqlite:///"):
        open_store(url)


def test_sqlite_synchronous_option(tmp_path):
    from sqlalchemy import text

    for value, expected in (("", 2), ("?synchronous=normal", 1)):
        engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}{value}")
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA synchronous")).scalar() == expected
        engine.dispose()
    with pytest.raises(ValueError, match="synchronous must be full or normal"):
        make_engine(f"sqlite:///{tmp_path / 'x.db'}?synchronous=off")
