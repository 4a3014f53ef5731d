"""Upserts of PostgresSink: an updating stream's rows replace the table's rows of their keys.

Inside the commit's transaction the staged rows are copied into a temporary table (in arrival
order) and moved into the target with ``INSERT ... ON CONFLICT (keys) DO UPDATE``, the last row
of each key winning (Flink's JDBC upsert sink; PostgreSQL's ``ON CONFLICT``).

Threading:
    The JobMaster's committer thread (blocking I/O), as the sink's commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from millrace.errors import CheckpointError

__all__ = ["require_unique_index", "staging_table", "upsert_staged"]

_STAGING = "millrace_upserts"
_ORDER = "__millrace_seq"


def staging_table(conn: Any, target: Any) -> Any:
    """The transaction's temporary table of staged upserts (created on first use), shaped like
    ``target`` (a ``psycopg.sql.Composable``) plus an arrival order column."""
    from psycopg import sql

    temp = sql.Identifier(_STAGING)
    conn.execute(
        sql.SQL(
            "CREATE TEMP TABLE IF NOT EXISTS {} (LIKE {} INCLUDING DEFAULTS) ON COMMIT DROP"
        ).format(temp, target)
    )
    conn.execute(
        sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} bigserial").format(
            temp, sql.Identifier(_ORDER)
        )
    )
    return temp


def upsert_staged(conn: Any, target: Any, keys: Sequence[str], names: Sequence[str]) -> None:
    """Move the staged upserts (columns ``names``) into ``target``: per key the last row staged
    replaces the table's row, or is inserted."""
    from psycopg import sql

    key_list = sql.SQL(", ").join(sql.Identifier(k) for k in keys)
    columns = sql.SQL(", ").join(sql.Identifier(n) for n in names)
    values = [n for n in names if n not in keys]
    action = (
        sql.SQL("DO UPDATE SET ")
        + sql.SQL(", ").join(
            sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(n), sql.Identifier(n)) for n in values
        )
        if values
        else sql.SQL("DO NOTHING")
    )
    conn.execute(
        sql.SQL(
            "INSERT INTO {} ({}) SELECT DISTINCT ON ({}) {} FROM {} ORDER BY {}, {} DESC "
            "ON CONFLICT ({}) {}"
        ).format(
            target,
            columns,
            key_list,
            columns,
            sql.Identifier(_STAGING),
            key_list,
            sql.Identifier(_ORDER),
            key_list,
            action,
        )
    )


def require_unique_index(conn: Any, target: Any, keys: Sequence[str], sink: str) -> None:
    """Check that ``target`` has a unique index on exactly ``keys`` (ON CONFLICT needs one).

    Raises:
        CheckpointError: If it has none, naming the index to create.
    """
    found = conn.execute(
        "SELECT 1 FROM pg_index i WHERE i.indrelid = to_regclass(%s) AND i.indisunique "
        "AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_attribute a "
        "WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) = %s::text[]",
        (target.as_string(conn), sorted(keys)),
    ).fetchone()
    if found is None:
        names = ", ".join(keys)
        raise CheckpointError(
            f"{sink}: the stream is an updating one keyed by {names}, and the table has no "
            f"unique index on exactly those columns to upsert on; create one (CREATE UNIQUE "
            f"INDEX ... ({names})) or let the sink create the table"
        )
