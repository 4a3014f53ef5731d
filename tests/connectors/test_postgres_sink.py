"""PostgresSink against a real PostgreSQL server on loopback (``tests.postgres_server``).

Two-phase commit: staged Parquet files become rows in one transaction per commit id, a replayed
commit adds nothing, abort drops staged files, a commit that cannot reach the server changes
nothing and succeeds when retried. The quick tests at the end need no server.
"""

from __future__ import annotations

import datetime as dt
import decimal
import pickle
import re
from pathlib import Path

import fsspec
import psycopg
import pyarrow as pa
import pytest

from millrace import PostgresSink
from millrace.connectors.postgres_sink import _first_line
from millrace.errors import CheckpointError, PipelineError
from tests.postgres_server import PostgresServer, free_port

JOB = "0123456789abcdef0123456789abcdef"
ATTEMPT = "attempt-aaaaaaaa"


def sink_of(conninfo: str, tmp_path: Path, **options: object) -> PostgresSink:
    return PostgresSink(conninfo, "delays", staging=str(tmp_path / "staging"), **options)  # type: ignore[arg-type]


def delays(*rows: tuple[str, int]) -> pa.Table:
    return pa.table(
        {"carrier": [r[0] for r in rows], "flights": pa.array([r[1] for r in rows], pa.int64())}
    )


def rows_of(conninfo: str, query: str = "SELECT carrier, flights FROM delays") -> list[tuple]:
    with psycopg.connect(conninfo) as conn:
        return sorted(conn.execute(query).fetchall())


def markers(conninfo: str) -> list[tuple]:
    return rows_of(conninfo, "SELECT sink_id, job_id, commit_id, rows FROM millrace_sink_commits")


def staged_files(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "staging").rglob("*") if p.is_file())


@pytest.mark.slow
def test_commit_puts_exactly_the_staged_rows_in_the_table(postgres_conninfo, tmp_path) -> None:
    sink = sink_of(postgres_conninfo, tmp_path)
    sink.initialize_global(JOB)
    first = sink.write(delays(("AA", 3), ("UA", 5)), JOB, 0, 0, ATTEMPT)
    second = sink.write(delays(("B6", 7)), JOB, 1, 0, ATTEMPT)
    assert (first.rows, second.rows) == (2, 1)
    assert len(staged_files(tmp_path)) == 2

    sink.commit(JOB, 1, [first.pending, second.pending])

    assert rows_of(postgres_conninfo) == [("AA", 3), ("B6", 7), ("UA", 5)]
    assert markers(postgres_conninfo) == [("delays", JOB, 1, 3)]
    assert staged_files(tmp_path) == []


@pytest.mark.slow
def test_replayed_commit_adds_nothing(postgres_conninfo, tmp_path) -> None:
    sink = sink_of(postgres_conninfo, tmp_path)
    staged = sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT).pending
    sink.commit(JOB, 1, [staged])

    sink.commit(JOB, 1, [staged])  # its file is gone: the marker says it is done
    # a crash between COMMIT and deleting the files: the files are still there
    again = sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT).pending
    sink.commit(JOB, 1, [again])

    assert rows_of(postgres_conninfo) == [("AA", 3)]
    assert markers(postgres_conninfo) == [("delays", JOB, 1, 1)]
    assert staged_files(tmp_path) == []  # the replay deleted the leftover


@pytest.mark.slow
def test_two_commits_of_different_ids_both_land(postgres_conninfo, tmp_path) -> None:
    sink = sink_of(postgres_conninfo, tmp_path)
    sink.commit(JOB, 1, [sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT).pending])
    sink.commit(JOB, 2, [sink.write(delays(("UA", 5)), JOB, 0, 1, ATTEMPT).pending])

    assert rows_of(postgres_conninfo) == [("AA", 3), ("UA", 5)]
    assert [m[2] for m in markers(postgres_conninfo)] == [1, 2]


@pytest.mark.slow
def test_same_commit_id_of_another_job_or_sink_lands(postgres_conninfo, tmp_path) -> None:
    sink = sink_of(postgres_conninfo, tmp_path)
    other_sink = sink_of(postgres_conninfo, tmp_path, sink_id="delays-copy")
    other_job = "f" * 32
    sink.commit(JOB, 1, [sink.write(delays(("AA", 1)), JOB, 0, 0, ATTEMPT).pending])
    sink.commit(other_job, 1, [sink.write(delays(("AA", 2)), other_job, 0, 0, ATTEMPT).pending])
    other_sink.commit(JOB, 1, [other_sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT).pending])

    assert rows_of(postgres_conninfo) == [("AA", 1), ("AA", 2), ("AA", 3)]


@pytest.mark.slow
def test_abort_drops_staged_files_except_kept_ones(postgres_conninfo, tmp_path) -> None:
    sink = sink_of(postgres_conninfo, tmp_path)
    kept = sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT).pending
    sink.write(delays(("UA", 5)), JOB, 1, 0, "attempt-bbbbbbbb")

    sink.abort(JOB, keep=[kept])
    assert sink.pending(JOB, {ATTEMPT, "attempt-bbbbbbbb"}) == [kept]
    sink.abort(JOB)

    assert sink.pending(JOB, {ATTEMPT}) == []
    assert not (tmp_path / "staging").exists() or not any((tmp_path / "staging").iterdir())
    sink.commit(JOB, 1, [])  # nothing to commit: no-op
    with psycopg.connect(postgres_conninfo) as conn:
        assert conn.execute("SELECT to_regclass('delays')").fetchone() == (None,)


@pytest.mark.slow
def test_pending_lists_the_files_of_the_given_attempts(postgres_conninfo, tmp_path) -> None:
    sink = sink_of(postgres_conninfo, tmp_path)
    mine = [sink.write(delays(("AA", i)), JOB, 0, i, ATTEMPT).pending for i in range(3)]
    sink.write(delays(("UA", 5)), JOB, 1, 0, "attempt-bbbbbbbb")
    sink.write(delays(("UA", 6)), "f" * 32, 0, 0, ATTEMPT)  # another job

    assert sink.pending(JOB, {ATTEMPT}) == sorted(mine)
    assert sink.pending(JOB, set()) == []


@pytest.mark.slow
def test_unreachable_server_fails_the_commit_clearly_and_a_retry_succeeds(
    private_postgres_server: PostgresServer, tmp_path
) -> None:
    conninfo = private_postgres_server.create_database()
    sink = sink_of(conninfo, tmp_path)
    sink.initialize_global(JOB)
    staged = sink.write(delays(("AA", 3), ("UA", 5)), JOB, 0, 0, ATTEMPT).pending
    private_postgres_server.stop()

    with pytest.raises(CheckpointError) as failed:
        sink.commit(JOB, 1, [staged])

    message = str(failed.value)
    assert sink.describe() in message and "commit 1 of job" in message
    assert "cannot connect to PostgreSQL" in message
    assert isinstance(failed.value.__cause__, psycopg.OperationalError)
    assert staged_files(tmp_path) != []  # nothing was lost
    private_postgres_server.start()
    sink.commit(JOB, 1, [staged])
    sink.commit(JOB, 1, [staged])
    assert rows_of(conninfo) == [("AA", 3), ("UA", 5)]


@pytest.mark.slow
def test_a_commit_with_a_lost_staged_file_leaves_nothing(postgres_conninfo, tmp_path) -> None:
    sink = sink_of(postgres_conninfo, tmp_path)
    sink.initialize_global(JOB)
    present = sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT).pending
    lost = sink.write(delays(("UA", 5)), JOB, 0, 1, ATTEMPT).pending
    Path(lost).unlink()

    with pytest.raises(CheckpointError, match=f"{lost} of commit 1 of job {JOB} is gone"):
        sink.commit(JOB, 1, [present, lost])

    with psycopg.connect(postgres_conninfo) as conn:  # rolled back: no table, no marker rows
        assert conn.execute("SELECT to_regclass('delays')").fetchone() == (None,)
        assert conn.execute("SELECT count(*) FROM millrace_sink_commits").fetchone() == (0,)
    assert Path(present).exists()


@pytest.mark.slow
def test_table_created_from_the_arrow_schema_keeps_types_and_nulls(
    postgres_conninfo, tmp_path
) -> None:
    when = dt.datetime(2013, 1, 1, 5, 0, tzinfo=dt.UTC)
    table = pa.table(
        {
            "Name": ["a", "", None, 'q"u,o\nte'],
            "small": pa.array([1, None, -3, 4], pa.int16()),
            "big": pa.array([2**62, 0, None, -1], pa.int64()),
            "unsigned": pa.array([2**64 - 1, 0, 1, None], pa.uint64()),
            "ratio": [0.1 + 0.2, float("inf"), None, -0.0],
            "ok": [True, False, None, True],
            "price": pa.array([decimal.Decimal("1.25")] * 3 + [None], pa.decimal128(6, 2)),
            "day": pa.array([dt.date(2013, 1, 2)] * 4, pa.date32()),
            "at": pa.array([when, None, when, when], pa.timestamp("us", tz="UTC")),
            "local": pa.array([dt.datetime(2013, 1, 1, 5, 0, 0, 7)] * 4, pa.timestamp("us")),
            "code": pa.array(["x", "y", None, "x"]).dictionary_encode(),
        }
    )
    sink = sink_of(postgres_conninfo, tmp_path)
    sink.commit(JOB, 1, [sink.write(table, JOB, 0, 0, ATTEMPT).pending])

    with psycopg.connect(postgres_conninfo) as conn:
        types = dict(
            conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = 'delays'"
            ).fetchall()
        )
        rows = conn.execute(
            'SELECT "Name", small, big, unsigned, ratio, ok, price, day, at, local, code '
            "FROM delays ORDER BY big NULLS LAST"
        ).fetchall()
    assert types["Name"] == "text" and types["small"] == "smallint"
    assert types["unsigned"] == "numeric" and types["ratio"] == "double precision"
    assert types["at"] == "timestamp with time zone"
    assert types["local"] == "timestamp without time zone"
    assert types["code"] == "text" and types["day"] == "date"
    expected = sorted(
        zip(*(table.column(i).to_pylist() for i in range(table.num_columns)), strict=True),
        key=lambda r: (r[2] is None, r[2]),
    )
    assert [list(r) for r in rows] == [
        [*e[:3], None if e[3] is None else decimal.Decimal(e[3]), *e[4:]] for e in expected
    ]


@pytest.mark.slow
def test_ddl_creates_the_table_and_overwrite_truncates_it(postgres_conninfo, tmp_path) -> None:
    ddl = (
        "CREATE TABLE delays (id serial PRIMARY KEY, carrier text NOT NULL, flights bigint); "
        "CREATE INDEX delays_by_carrier ON delays (carrier)"
    )
    sink = sink_of(postgres_conninfo, tmp_path, ddl=ddl, mode="overwrite")
    sink.initialize_global(JOB)
    sink.commit(JOB, 1, [sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT).pending])
    assert rows_of(postgres_conninfo, "SELECT id, carrier, flights FROM delays") == [(1, "AA", 3)]

    next_job = "e" * 32
    sink.initialize_global(next_job)  # a new run in overwrite mode starts empty
    sink.commit(next_job, 1, [sink.write(delays(("UA", 5)), next_job, 0, 0, ATTEMPT).pending])
    assert rows_of(postgres_conninfo) == [("UA", 5)]

    appending = sink_of(postgres_conninfo, tmp_path, ddl=ddl)
    appending.initialize_global(JOB[::-1])
    assert rows_of(postgres_conninfo) == [("UA", 5)]


@pytest.mark.slow
def test_data_that_does_not_fit_the_table_fails_the_commit_naming_the_sink(
    postgres_conninfo, tmp_path
) -> None:
    with psycopg.connect(postgres_conninfo) as conn:
        conn.execute("CREATE TABLE delays (carrier text, flights integer NOT NULL)")
    sink = sink_of(postgres_conninfo, tmp_path)
    sink.initialize_global(JOB)
    staged = sink.write(
        pa.table({"carrier": ["AA"], "flights": pa.array([None], pa.int64())}), JOB, 0, 0, ATTEMPT
    ).pending

    with pytest.raises(CheckpointError) as failed:
        sink.commit(JOB, 1, [staged])

    assert sink.describe() in str(failed.value) and "flights" in str(failed.value)
    assert markers(postgres_conninfo) == []


@pytest.mark.slow
def test_a_schema_qualified_table_name_is_taken_literally(postgres_conninfo, tmp_path) -> None:
    with psycopg.connect(postgres_conninfo) as conn:
        conn.execute("CREATE SCHEMA flights")
    sink = PostgresSink(postgres_conninfo, "flights.Daily.v2", staging=str(tmp_path / "staging"))
    sink.initialize_global(JOB)
    sink.commit(JOB, 1, [sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT).pending])

    # schema "flights", table "Daily.v2": the first dot separates them, the rest is the name
    assert rows_of(postgres_conninfo, 'SELECT carrier, flights FROM flights."Daily.v2"') == [
        ("AA", 3)
    ]


@pytest.mark.slow
def test_ddl_creates_the_table_when_the_job_starts(postgres_conninfo, tmp_path) -> None:
    ddl = "CREATE TABLE delays (carrier text NOT NULL, flights bigint NOT NULL)"
    sink_of(postgres_conninfo, tmp_path, ddl=ddl).initialize_global(JOB)

    with psycopg.connect(postgres_conninfo) as conn:  # before any commit: readers find it
        assert conn.execute("SELECT to_regclass('delays')").fetchone() == ("delays",)
        assert conn.execute("SELECT count(*) FROM delays").fetchone() == (0,)


# Quick: no server ---------------------------------------------------------------------------


def test_a_database_error_is_named_by_its_first_line_or_else_its_type() -> None:
    assert _first_line(psycopg.OperationalError("server closed\nDETAIL: more")) == "server closed"
    assert _first_line(psycopg.OperationalError("")) == "OperationalError"


@pytest.mark.parametrize(
    ("table", "marker"), [("", "millrace_sink_commits"), ("delays", ""), ("", "")]
)
def test_a_table_and_a_marker_table_name_are_required(table: str, marker: str) -> None:
    with pytest.raises(ValueError) as refused:
        PostgresSink("dbname=x", table, marker_table=marker)
    assert str(refused.value) == "PostgresSink needs a table name and a marker table name"


def test_the_connect_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="connect_timeout must be positive, got 0"):
        PostgresSink("dbname=x", "t", connect_timeout=0)
    assert PostgresSink("dbname=x", "t", connect_timeout=0.5).connect_timeout == 0.5


@pytest.mark.parametrize(
    ("conninfo", "server"),
    [
        ("dbname=flights", "localhost:5432/flights"),
        ("hostaddr=10.0.0.7 port=6000", "10.0.0.7:6000/(default)"),
        ("host=db user=u password=secret", "db:5432/(default)"),
        ("postgresql://u@h:6001/flights", "h:6001/flights"),
        ("not a conninfo", "an unparsable conninfo"),
    ],
)
def test_describe_names_the_server_with_libpqs_defaults(conninfo: str, server: str) -> None:
    assert PostgresSink(conninfo, "t").describe() == f"postgresql table t at {server}"


def test_pre_commit_checks_the_staged_files_and_names_the_sink(tmp_path) -> None:
    sink = PostgresSink("dbname=x", "delays", staging=str(tmp_path / "staging"))
    staged = sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT).pending
    assert staged is not None
    sink.pre_commit(JOB, 1, [staged])
    Path(staged).unlink()

    with pytest.raises(CheckpointError, match="missing at pre-commit") as missing:
        sink.pre_commit(JOB, 1, [staged])
    assert sink.describe() in str(missing.value)


def test_an_empty_table_stages_nothing(tmp_path) -> None:
    sink = PostgresSink("dbname=x", "delays", staging=str(tmp_path / "staging"))
    written = sink.write(delays(), JOB, 0, 0, ATTEMPT)
    assert (written.rows, written.pending) == (0, None)
    assert staged_files(tmp_path) == []


def test_each_sink_stages_apart_and_abort_leaves_no_directory_behind(tmp_path) -> None:
    staging = str(tmp_path / "staging")
    mine = PostgresSink("host=a dbname=x", "delays", staging=staging)
    same_id_other_db = PostgresSink("host=a dbname=y", "delays", staging=staging)
    slashed = PostgresSink("host=a dbname=x", "delays", staging=staging, sink_id="daily/v2")
    kept = []
    for sink in (mine, same_id_other_db, slashed):
        kept.append(sink.write(delays(("AA", 1)), JOB, 0, 0, ATTEMPT).pending)

    mine.abort(JOB)
    slashed.abort(JOB)

    assert mine.pending(JOB, {ATTEMPT}) == slashed.pending(JOB, {ATTEMPT}) == []
    assert same_id_other_db.pending(JOB, {ATTEMPT}) == [kept[1]]
    assert len(list((tmp_path / "staging").iterdir())) == 1  # only the other database's


def test_abort_drops_a_directory_left_among_the_staged_files_too(tmp_path) -> None:
    sink = PostgresSink("dbname=x", "delays", staging=str(tmp_path / "staging"))
    staged = sink.write(delays(("AA", 1)), JOB, 0, 0, ATTEMPT).pending
    assert staged is not None
    left = Path(staged).parent / "left-by-another-tool"
    left.mkdir()
    (left / "data").write_bytes(b"x")
    sink.abort(JOB)
    assert list((tmp_path / "staging").iterdir()) == []


def test_a_staged_file_is_named_by_job_subtask_attempt_and_sequence_in_the_sinks_directory(
    tmp_path, monkeypatch
) -> None:
    gone = tmp_path / "working-directory"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # only absolute paths still work: the temporary file lies next to the staged one
    sink = PostgresSink("dbname=x", "delays", staging=str(tmp_path / "st"), sink_id="daily/v2")
    staged = sink.write(delays(("AA", 1)), JOB, 3, 7, ATTEMPT).pending
    assert staged is not None
    path = Path(staged)
    assert path.name == f"part-{JOB[:8]}-00003-{ATTEMPT[:8]}-000007.parquet.{ATTEMPT}"
    assert path.parent.name == JOB
    assert re.fullmatch(r"daily%2Fv2-[0-9a-f]{12}", path.parent.parent.name)
    assert list(path.parent.iterdir()) == [path]


def test_staging_works_on_a_non_local_fsspec_file_system(memory_root) -> None:
    sink = PostgresSink("dbname=x", "delays", staging=memory_root)
    kept = sink.write(delays(("AA", 1)), JOB, 0, 0, ATTEMPT).pending
    sink.write(delays(("UA", 2)), JOB, 0, 1, ATTEMPT)
    sink.pre_commit(JOB, 1, [kept or ""])

    sink.abort(JOB, keep=[kept or ""])
    assert sink.pending(JOB, {ATTEMPT}) == [kept]
    sink.abort(JOB)
    assert fsspec.filesystem("memory").ls(memory_root, detail=False) == []


def test_preparing_a_job_without_its_database_fails_naming_the_sink_and_the_job(
    tmp_path,
) -> None:
    conninfo = f"host=127.0.0.1 port={free_port()} dbname=x user=postgres"  # nobody listens
    sink = PostgresSink(conninfo, "delays", staging=str(tmp_path / "staging"))

    with pytest.raises(CheckpointError, match=f"preparing job {JOB} failed: cannot connect"):
        sink.initialize_global(JOB)


def test_sink_pickles_and_hides_the_conninfo(tmp_path) -> None:
    sink = PostgresSink(
        "host=db.example port=6543 dbname=flights user=u password=hunter2",
        "public.delays",
        staging="rel/staging",
    )

    assert pickle.loads(pickle.dumps(sink)) == sink
    assert sink.describe() == "postgresql table public.delays at db.example:6543/flights"
    assert "hunter2" not in repr(sink) and "hunter2" not in sink.describe()
    assert Path(sink.staging).is_absolute() and sink.sink_id == "public.delays"
    assert PostgresSink("x", "t", staging="s3://bucket/staging").staging == "s3://bucket/staging"


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode"):
        PostgresSink("dbname=x", "t", mode="upsert")


def test_the_refusal_of_columns_without_a_postgres_type_names_them_and_the_fix(tmp_path) -> None:
    sink = PostgresSink("dbname=x", "t", staging=str(tmp_path))
    table = pa.table({"tags": pa.array([["a"]]), "ok": [1], "pairs": pa.array([{"k": 1}])})

    with pytest.raises(PipelineError) as refused:
        sink.write(table, JOB, 0, 0, ATTEMPT)
    message = str(refused.value)
    assert message.startswith(sink.describe()) and "tags" in message and "pairs" in message
    assert "ok" not in message.split("column(s)")[1]
    assert message == (
        f"{sink.describe()}: no PostgreSQL type for column(s) tags: list<item: string>, "
        "pairs: struct<k: int64>; "
        "cast them in a transform before the sink"
    )


def test_a_column_without_a_postgres_type_fails_the_write(tmp_path) -> None:
    sink = PostgresSink("dbname=x", "t", staging=str(tmp_path))
    table = pa.table({"ok": [1], "tags": pa.array([["a"]], pa.list_(pa.string()))})

    with pytest.raises(PipelineError, match="tags"):
        sink.write(table, JOB, 0, 0, ATTEMPT)
    assert list(tmp_path.iterdir()) == []


# Upserts (issue 11): an updating stream's rows replace the rows of their keys ---------------


@pytest.mark.slow
def test_upsert_commits_replace_the_rows_of_their_keys(postgres_conninfo, tmp_path) -> None:
    sink = sink_of(postgres_conninfo, tmp_path).with_upsert_keys(("carrier",))
    sink.initialize_global(JOB)
    sink.commit(JOB, 1, [sink.write(delays(("AA", 3), ("UA", 5)), JOB, 0, 0, ATTEMPT).pending])
    # a later checkpoint: AA changed, B6 is new, UA unchanged (not emitted)
    sink.commit(JOB, 2, [sink.write(delays(("AA", 4), ("B6", 1)), JOB, 0, 1, ATTEMPT).pending])

    assert rows_of(postgres_conninfo) == [("AA", 4), ("B6", 1), ("UA", 5)]
    assert markers(postgres_conninfo) == [("delays", JOB, 1, 2), ("delays", JOB, 2, 2)]


@pytest.mark.slow
def test_within_one_commit_the_last_staged_row_of_a_key_wins(postgres_conninfo, tmp_path) -> None:
    """A commit that carries an earlier failed one's files lists them first."""
    sink = sink_of(postgres_conninfo, tmp_path).with_upsert_keys(("carrier",))
    earlier = sink.write(delays(("AA", 3), ("UA", 5)), JOB, 0, 0, ATTEMPT).pending
    later = sink.write(delays(("AA", 9)), JOB, 0, 1, ATTEMPT).pending
    sink.commit(JOB, 2, [earlier, later])
    sink.commit(JOB, 2, [earlier, later])  # replayed: nothing more

    assert rows_of(postgres_conninfo) == [("AA", 9), ("UA", 5)]


@pytest.mark.slow
def test_upsert_into_a_table_without_a_unique_index_fails_at_start(
    postgres_conninfo, tmp_path
) -> None:
    with psycopg.connect(postgres_conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE delays (carrier text, flights bigint)")
    sink = sink_of(postgres_conninfo, tmp_path).with_upsert_keys(("carrier",))
    with pytest.raises(CheckpointError, match=r"no unique index on exactly those columns"):
        sink.initialize_global(JOB)
    with psycopg.connect(postgres_conninfo, autocommit=True) as conn:
        conn.execute("CREATE UNIQUE INDEX ON delays (carrier)")
    sink.initialize_global(JOB)  # now it may
    sink.commit(JOB, 1, [sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT).pending])
    sink.commit(JOB, 2, [sink.write(delays(("AA", 5)), JOB, 0, 1, ATTEMPT).pending])
    assert rows_of(postgres_conninfo) == [("AA", 5)]


def test_an_updating_stream_that_lost_its_key_column_is_refused_at_write(tmp_path) -> None:
    sink = sink_of("host=127.0.0.1", tmp_path).with_upsert_keys(("origin",))
    with pytest.raises(PipelineError, match=r"lost its key column\(s\) origin"):
        sink.write(delays(("AA", 3)), JOB, 0, 0, ATTEMPT)


def test_an_upsert_needs_keys(tmp_path) -> None:
    with pytest.raises(ValueError, match="at least one key column"):
        sink_of("host=127.0.0.1", tmp_path).with_upsert_keys(())
