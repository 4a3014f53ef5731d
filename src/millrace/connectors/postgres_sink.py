"""PostgresSink: rows into a PostgreSQL table, exactly once, with two-phase commit.

Phase one, on the task side (no database connection there): each ``write`` stages the Arrow
table as one Parquet file under ``<staging>/<sink>/<job id>/``, named by job, subtask, attempt
and sequence; a checkpoint lists the files staged before its barrier.

Phase two, in the JobMaster once the checkpoint is complete: ``commit`` loads the listed files
in ONE transaction that first inserts ``(sink_id, job_id, commit_id)`` into a marker table
(``millrace_sink_commits``), then streams every file into the target table with
``COPY ... FROM STDIN (FORMAT csv)`` (CSV written by Arrow, ``postgres_types``). If the marker is
already there, the commit was done before (a commit replayed after a failure, a restore or an
ambiguous connection loss at ``COMMIT``) and nothing is loaded: the marker's primary key makes
that true even for two committers racing. After the transaction commits the staged files are
deleted; files that no completed checkpoint lists are deleted by ``abort`` when the job
restores, fails or is cancelled (Flink's TwoPhaseCommitSinkFunction; the marker plays the role
of Flink's JDBC XA transaction id).

The target table:

- exists: rows are copied into the columns named like the Arrow columns (other columns take
  their defaults);
- is missing and ``ddl`` is given: ``ddl`` is executed (at job start and, if the table was
  dropped meanwhile, in the commit's transaction);
- is missing and ``ddl`` is None: it is created in the first commit's transaction from the Arrow
  schema of the staged data (types in ``millrace.connectors.postgres_types``; all columns
  nullable, no key).

Modes: ``append`` (default) adds rows; ``overwrite`` empties the table (``TRUNCATE``) when the
job starts for the first time (not when it restores a checkpoint or savepoint).

Updating streams (a running aggregate of an unbounded job) reach the sink in upsert mode
(``with_upsert_keys``, called by the JobGraph generator): the commit copies the staged rows into
a temporary table and inserts them with ``ON CONFLICT (keys) DO UPDATE``, the last row of a key
winning, in the same transaction as the marker, so a key's value and the checkpoint that
produced it are committed together. The target table needs a unique index on the key columns;
a table the sink creates gets one (``UNIQUE NULLS NOT DISTINCT``, PostgreSQL 15 or later).
"""

from __future__ import annotations

import hashlib
import math
import os
import posixpath
import urllib.parse
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from millrace.api.connector.sink import SinkWrite
from millrace.connectors.file_formats import absolute_local_path
from millrace.connectors.postgres_types import csv_chunks, postgres_type, unsupported_columns
from millrace.connectors.postgres_upsert import (
    require_unique_index,
    staging_table,
    upsert_staged,
)
from millrace.connectors.staged_files import make_durable
from millrace.errors import CheckpointError, PipelineError

__all__ = ["PostgresSink"]

_MODES = ("append", "overwrite")
_DEFAULT_STAGING = os.path.join(".millrace", "postgres-staging")


@dataclass(frozen=True)
class PostgresSink:
    """Rows into the PostgreSQL table ``table``, exactly once.

    Args:
        conninfo: libpq connection string or URI, e.g. ``"host=127.0.0.1 port=5432
            dbname=flights user=millrace"`` or ``"postgresql://millrace@db/flights"``. It is
            used only by the JobMaster (commits); it is kept out of ``repr`` and ``describe``
            (it may hold a password).
        table: Target table, ``name`` or ``schema.name``, taken literally (case-sensitive,
            quoted in SQL).
        staging: Directory of the staged Parquet files: a local path (made absolute here, so
            every process of one machine uses the same one) or an fsspec URL that the
            TaskManagers and the JobMaster all reach. Default ``.millrace/postgres-staging``
            under the current directory.
        mode: ``append`` (default) or ``overwrite`` (``TRUNCATE`` when the job starts without
            restoring a checkpoint or savepoint).
        ddl: SQL run when the table is missing (a ``CREATE TABLE`` statement, possibly followed
            by others separated by ``;``, e.g. ``CREATE INDEX``), or None to create the table
            from the Arrow schema of the first commit.
        sink_id: Name of this sink in the marker table; default ``table``. Two sinks of one job
            writing into one table need distinct ids.
        marker_table: Table of the committed ``(sink_id, job_id, commit_id)``, ``name`` or
            ``schema.name``; created when missing.
        connect_timeout: Seconds to wait for a connection (libpq rounds up to whole seconds,
            at least 2).
        upsert_keys: Key columns of an updating stream (set by ``with_upsert_keys``): rows
            replace the table's row of their key instead of adding one. None: append.

    Raises:
        ValueError: For an unknown mode, an empty table name or a non-positive timeout.

    Threading:
        Immutable; ``write`` on task threads, every other method on the JobMaster's committer
        thread (blocking I/O).
    """

    conninfo: str = field(repr=False)
    table: str
    staging: str = _DEFAULT_STAGING
    mode: str = "append"
    ddl: str | None = None
    sink_id: str | None = None
    marker_table: str = "millrace_sink_commits"
    connect_timeout: float = 10.0
    upsert_keys: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ValueError(f"PostgresSink mode must be one of {_MODES}, got {self.mode!r}")
        if not self.table or not self.marker_table:
            raise ValueError("PostgresSink needs a table name and a marker table name")
        if not self.connect_timeout > 0:
            raise ValueError(
                f"PostgresSink connect_timeout must be positive, got {self.connect_timeout}"
            )
        object.__setattr__(self, "staging", absolute_local_path(self.staging))
        if self.sink_id is None:
            object.__setattr__(self, "sink_id", self.table)

    def describe(self) -> str:
        """``postgresql table T at HOST:PORT/DB`` (no user, no password)."""
        return f"postgresql table {self.table} at {self._server()}"

    def with_upsert_keys(self, keys: tuple[str, ...]) -> PostgresSink:
        """This sink for an updating stream keyed by ``keys``: each commit upserts its rows on
        those columns (``INSERT ... ON CONFLICT (keys) DO UPDATE``).

        Raises:
            ValueError: If ``keys`` is empty.
        """
        if not keys:
            raise ValueError("an upsert needs at least one key column")
        return replace(self, upsert_keys=tuple(keys))

    # Task side ---------------------------------------------------------------------------------

    def write(
        self, table: Any, job_id: str, subtask: int, sequence: int, attempt_id: str
    ) -> SinkWrite:
        """Task thread: stage ``table`` (``pyarrow.Table``) as one Parquet file.

        The file is named by job, subtask, attempt and sequence, so attempts of a restarted job
        never collide, and a zombie of a failed attempt writes only files nobody commits.

        Returns:
            The rows and the staged file's path (None for an empty table).

        Raises:
            PipelineError: If a column has no PostgreSQL type (``postgres_types``), or an
                upsert key column is missing.
        """
        import pyarrow.parquet as pq

        refused = unsupported_columns(table.schema)
        if refused:
            raise PipelineError(
                f"{self.describe()}: no PostgreSQL type for column(s) {', '.join(refused)}; "
                "cast them in a transform before the sink"
            )
        missing = [k for k in self.upsert_keys or () if k not in table.column_names]
        if missing:
            raise PipelineError(
                f"{self.describe()}: the updating stream lost its key column(s) "
                f"{', '.join(missing)} on the way to the sink; keep them through transform()"
            )
        if table.num_rows == 0:
            return SinkWrite(0, None)
        fs, directory = self._job_dir(job_id)
        fs.makedirs(directory, exist_ok=True)
        name = f"part-{job_id[:8]}-{subtask:05d}-{attempt_id[:8]}-{sequence:06d}.parquet"
        tmp = posixpath.join(directory, f".{name}.{attempt_id}.tmp")
        with fs.open(tmp, "wb") as f:
            pq.write_table(table, f)
        staged = posixpath.join(directory, f"{name}.{attempt_id}")
        fs.mv(tmp, staged)
        return SinkWrite(table.num_rows, staged)

    def pre_commit(self, job_id: str, checkpoint_id: int, pending: Sequence[str]) -> None:
        """Task thread, at a barrier: make the staged files durable (``staged_files``).

        Raises:
            CheckpointError: If a staged file is missing.
            OSError: If a file cannot be synced.
        """
        fs, _ = self._job_dir(job_id)
        make_durable(fs, pending, self.describe())

    # JobMaster side ----------------------------------------------------------------------------

    def initialize_global(self, job_id: str) -> None:
        """Before the first deployment: create the marker table, run ``ddl`` if the table is
        missing, ``TRUNCATE`` it in overwrite mode, and drop this job's staged files.

        Raises:
            CheckpointError: If the database cannot be reached or a statement fails (the
                message names the sink; PostgreSQL's error is the cause).
        """
        from psycopg import sql

        self.abort(job_id)
        with self._transaction(f"preparing job {job_id}") as conn:
            self._ensure_marker_table(conn)
            if self.ddl is not None:
                self._ensure_table(conn, None)
            if self.mode == "overwrite" and self._exists(conn, self._table_sql()):
                conn.execute(sql.SQL("TRUNCATE {}").format(self._table_sql()))
            if self.upsert_keys is not None and self._exists(conn, self._table_sql()):
                require_unique_index(conn, self._table_sql(), self.upsert_keys, self.describe())

    def commit(self, job_id: str, commit_id: int, pending: Sequence[str]) -> None:
        """Load ``pending`` into the table in one transaction, unless ``commit_id`` of this
        job and sink is in the marker table already; then delete the staged files.

        Args:
            job_id: The job.
            commit_id: The checkpoint id the files belong to.
            pending: Staged files returned by ``write`` (an empty list is a no-op).

        Raises:
            CheckpointError: If the database cannot be reached, a statement fails (the table's
                columns do not fit the data, ...) or a staged file of a commit not yet done is
                gone. Nothing of the commit is visible then, and a later call with the same
                arguments (the restored job's) does it.
        """
        if not pending:
            return
        with self._transaction(f"commit {commit_id} of job {job_id}") as conn:
            if self._mark(conn, job_id, commit_id):
                rows = self._load(conn, job_id, commit_id, pending)
                self._count(conn, job_id, commit_id, rows)
        fs, _ = self._job_dir(job_id)
        for staged in pending:
            if fs.exists(staged):
                fs.rm(staged)

    def pending(self, job_id: str, attempt_ids: Collection[str]) -> list[str]:
        """The staged files written by ``attempt_ids``, sorted."""
        fs, directory = self._job_dir(job_id)
        if not fs.exists(directory):
            return []
        found = []
        for name in sorted(fs.ls(directory, detail=False)):
            base = posixpath.basename(name)
            if base.startswith("part-") and base.rsplit(".", 1)[1] in attempt_ids:
                found.append(name)
        return found

    def abort(self, job_id: str, keep: Collection[str] = ()) -> None:
        """Drop the job's staged files except ``keep`` (and empty directories)."""
        fs, directory = self._job_dir(job_id)
        if fs.exists(directory):
            kept = set(keep)
            for name in fs.ls(directory, detail=False):
                if name not in kept:
                    fs.rm(name, recursive=True)
            if not fs.ls(directory, detail=False):
                fs.rm(directory, recursive=True)
        sink_dir = posixpath.dirname(directory)
        if fs.exists(sink_dir) and not fs.ls(sink_dir, detail=False):
            fs.rm(sink_dir, recursive=True)

    # Database ----------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self, what: str) -> Iterator[Any]:
        """A connection inside one transaction, committed when the block ends; psycopg's
        errors become CheckpointError naming the sink and ``what``."""
        import psycopg

        try:
            conn = psycopg.connect(
                self.conninfo,
                autocommit=True,
                connect_timeout=max(2, math.ceil(self.connect_timeout)),
                application_name="millrace-postgres-sink",
            )
        except psycopg.Error as error:
            raise CheckpointError(
                f"{self.describe()}: {what} failed: cannot connect to PostgreSQL: "
                f"{_first_line(error)} (nothing was written; a commit is retried idempotently "
                "when the job restarts from its checkpoint)"
            ) from error
        try:
            with conn, conn.transaction():
                yield conn
        except psycopg.Error as error:
            raise CheckpointError(
                f"{self.describe()}: {what} failed: {_first_line(error)}"
            ) from error

    def _mark(self, conn: Any, job_id: str, commit_id: int) -> bool:
        """Insert the commit's marker; False if it was there (the commit is done). Blocks
        while another transaction holds the same marker uncommitted."""
        from psycopg import sql

        self._ensure_marker_table(conn)
        inserted = conn.execute(
            sql.SQL(
                "INSERT INTO {} (sink_id, job_id, commit_id) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING RETURNING 1"
            ).format(self._marker_sql()),
            (self.sink_id, job_id, commit_id),
        ).fetchone()
        return inserted is not None

    def _count(self, conn: Any, job_id: str, commit_id: int, rows: int) -> None:
        from psycopg import sql

        conn.execute(
            sql.SQL(
                "UPDATE {} SET rows = %s WHERE sink_id = %s AND job_id = %s AND commit_id = %s"
            ).format(self._marker_sql()),
            (rows, self.sink_id, job_id, commit_id),
        )

    def _load(self, conn: Any, job_id: str, commit_id: int, pending: Sequence[str]) -> int:
        """COPY every staged file into the table (created first if missing); returns rows."""
        import pyarrow.parquet as pq
        from psycopg import sql

        fs, _ = self._job_dir(job_id)
        rows = 0
        for staged in pending:
            if not fs.exists(staged):
                raise CheckpointError(
                    f"{self.describe()}: staged file {staged} of commit {commit_id} of job "
                    f"{job_id} is gone"
                )
            with fs.open(staged, "rb") as f:
                parquet = pq.ParquetFile(f)
                schema = parquet.schema_arrow
                self._ensure_table(conn, schema)
                target = (
                    self._table_sql()
                    if self.upsert_keys is None
                    else staging_table(conn, self._table_sql())
                )
                columns = sql.SQL(", ").join(sql.Identifier(n) for n in schema.names)
                statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(target, columns)
                with conn.cursor().copy(statement) as copy:
                    for chunk in csv_chunks(parquet):
                        copy.write(chunk)
                rows += parquet.metadata.num_rows
        if self.upsert_keys is not None and pending:
            upsert_staged(conn, self._table_sql(), self.upsert_keys, schema.names)
        return rows

    def _ensure_table(self, conn: Any, schema: Any) -> None:
        """Create the target table if missing: ``ddl``, or from ``schema`` (``pyarrow.Schema``;
        None: only ``ddl``). Creation is serialized by an advisory lock on the table name."""
        from psycopg import sql

        target = self._table_sql()
        if self._exists(conn, target):
            return
        if self.ddl is None and schema is None:
            return
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._key(self.table),))
        if self._exists(conn, target):
            return
        if self.ddl is not None:
            conn.execute(sql.SQL(self.ddl))  # the user's DDL, not a literal
            return
        columns = [
            sql.SQL("{} {}").format(sql.Identifier(f.name), sql.SQL(postgres_type(f.type)))
            for f in schema
        ]
        if self.upsert_keys is not None:
            keys = sql.SQL(", ").join(sql.Identifier(k) for k in self.upsert_keys)
            columns.append(sql.SQL("UNIQUE NULLS NOT DISTINCT ({})").format(keys))
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(target, sql.SQL(", ").join(columns)))

    def _ensure_marker_table(self, conn: Any) -> None:
        from psycopg import sql

        marker = self._marker_sql()
        if self._exists(conn, marker):
            return
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._key(self.marker_table),))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (sink_id text NOT NULL, job_id text NOT NULL, "
                "commit_id bigint NOT NULL, rows bigint NOT NULL DEFAULT 0, "
                "committed_at timestamptz NOT NULL DEFAULT now(), "
                "PRIMARY KEY (sink_id, job_id, commit_id))"
            ).format(marker)
        )

    def _exists(self, conn: Any, name: Any) -> bool:
        found = conn.execute("SELECT to_regclass(%s)", (name.as_string(conn),)).fetchone()
        return found is not None and found[0] is not None

    def _table_sql(self) -> Any:
        return _qualified(self.table)

    def _marker_sql(self) -> Any:
        return _qualified(self.marker_table)

    def _key(self, name: str) -> str:
        return f"millrace-postgres-sink:{name}"

    # Staging and naming ------------------------------------------------------------------------

    def _job_dir(self, job_id: str) -> tuple[Any, str]:
        """(fsspec filesystem, this sink's staging directory of ``job_id``)."""
        import fsspec

        fs, root = fsspec.core.url_to_fs(self.staging)
        target = f"{self._server()}\0{self.table}\0{self.sink_id}"
        digest = hashlib.sha256(target.encode()).hexdigest()[:12]
        name = f"{urllib.parse.quote(str(self.sink_id), safe='')}-{digest}"
        return fs, posixpath.join(root, name, job_id)

    def _server(self) -> str:
        """``host:port/dbname`` from the conninfo (libpq's defaults where it names none)."""
        from psycopg.conninfo import conninfo_to_dict

        try:
            params = conninfo_to_dict(self.conninfo)
        except Exception:  # described, not validated: connecting reports a bad conninfo
            return "an unparsable conninfo"
        host = params.get("host") or params.get("hostaddr") or "localhost"
        return f"{host}:{params.get('port') or 5432}/{params.get('dbname') or '(default)'}"


def _qualified(name: str) -> Any:
    """``name`` or ``schema.name`` as a quoted SQL identifier."""
    from psycopg import sql

    return sql.Identifier(*name.split(".", 1))


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
