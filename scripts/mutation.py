"""Mutation testing of the exactly-once modules with mutmut (``make mutation``).

Usage::

    python scripts/mutation.py                 # fresh run of every mutant, then the summary
    python scripts/mutation.py run [NAME ...]  # re-test only these mutants (globs allowed),
                                               # keeping mutants/ and its earlier results
    python scripts/mutation.py report          # the summary of the last run, from mutants/
    python scripts/mutation.py survivors       # every surviving mutant with its diff

What is mutated and with which tests is ``[tool.mutmut]`` in ``pyproject.toml``. mutmut copies
``src/`` and ``tests/`` to ``mutants/``, runs the selected tests once to learn which test calls
which function, then tests each mutant in a pytest session of its own (forked) with only the
tests that call the mutated function; the first failing test kills it. Every such session
starts its own session fixtures: a SparkSession (a JVM) for a mutant of
``spark/windowing.py``, a PostgreSQL server for a mutant of ``postgres_sink.py``.

A fresh run deletes ``mutants/`` first: mutmut keeps the verdicts of unchanged functions, and a
test added since would not be given the chance to kill a mutant that survived before. The
run's temporary files (and the PostgreSQL servers the tests start) live in a directory of its
own; a server that a timed-out mutant left running is stopped by the PID in its
``postmaster.pid`` at the end.

The summary prints, per module and per file: mutants, killed, survived, timeout, no tests,
other (suspicious, segfault, not checked) and the % killed (killed / mutants).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "mutants"
MUTMUT = Path(sys.executable).with_name("mutmut")

# The modules of issues 17 and 29, by the path prefix of their files.
MODULES = {
    "runtime/checkpoint/": "src/millrace/runtime/checkpoint/",
    "runtime/io/": "src/millrace/runtime/io/",
    "runtime/highavailability/": "src/millrace/runtime/highavailability/",
    "dispatcher/dispatcher.py": "src/millrace/runtime/dispatcher/dispatcher.py",
    "jobmaster/sink_committer.py": "src/millrace/runtime/jobmaster/sink_committer.py",
    "spark/windowing.py": "src/millrace/spark/windowing.py",
    "spark/window_stream_task.py": "src/millrace/spark/window_stream_task.py",
    "spark/window_firing.py": "src/millrace/spark/window_firing.py",
    "spark/keyed_aggregate_stream_task.py": "src/millrace/spark/keyed_aggregate_stream_task.py",
    "spark/running_aggregation.py": "src/millrace/spark/running_aggregation.py",
    "spark/interval_join_stream_task.py": "src/millrace/spark/interval_join_stream_task.py",
    "spark/two_input_stream_task.py": "src/millrace/spark/two_input_stream_task.py",
    "spark/keyed_state_files.py": "src/millrace/spark/keyed_state_files.py",
    "spark/keyed_chain_stream_task.py": "src/millrace/spark/keyed_chain_stream_task.py",
    "connectors/parquet_sink.py": "src/millrace/connectors/parquet_sink.py",
    "connectors/postgres_sink.py": "src/millrace/connectors/postgres_sink.py",
    "connectors/http_source_log.py": "src/millrace/connectors/http_source_log.py",
}
COLUMNS = ("mutants", "killed", "survived", "timeout", "no tests", "other")


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "fresh"
    if command == "fresh":
        return run([], fresh=True)
    if command == "run":
        return run(argv[1:], fresh=False)
    if command == "report":
        return report()
    if command == "survivors":
        return survivors()
    print(__doc__)
    return 2


def run(names: list[str], *, fresh: bool) -> int:
    """Run mutmut (one worker unless MUTATION_CHILDREN says otherwise), then report."""
    if fresh and MUTANTS.exists():
        shutil.rmtree(MUTANTS)
    children = os.environ.get("MUTATION_CHILDREN", "1")
    scratch = Path(tempfile.mkdtemp(prefix="millrace-mutation-"))
    scratch.chmod(0o755)  # the tests' PostgreSQL servers run as the postgres user in here
    env = {**os.environ, "TMPDIR": str(scratch)}
    started = time.monotonic()
    try:
        with shared_spark_jvm(env):
            done = subprocess.run(
                [str(MUTMUT), "run", "--max-children", children, *names], cwd=ROOT, env=env
            )
    finally:
        stop_left_servers(scratch)
        shutil.rmtree(scratch, ignore_errors=True)
    minutes = (time.monotonic() - started) / 60
    print(f"\nmutmut exited with {done.returncode} after {minutes:.1f} min")
    report()
    return done.returncode


@contextlib.contextmanager
def shared_spark_jvm(env: dict[str, str]) -> Iterator[None]:
    """Start one Spark JVM (PySpark's gateway, launched as a SparkSession would launch it) for
    the whole run and point every test session at it (``PYSPARK_GATEWAY_PORT`` and
    ``PYSPARK_GATEWAY_SECRET`` in ``env``: PySpark then connects instead of launching). Each
    mutant's session starts and stops a SparkContext in it; ``tests/conftest.py`` stops one a
    killed session left. The JVM is stopped (its stdin closed, killed after 20 s) at the end.
    """
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    sys.path.insert(0, str(ROOT / "src"))
    from millrace.config import Configuration
    from millrace.spark.spark_session import spark_settings

    settings = spark_settings(Configuration({"spark.master": "local[2]"}))
    os.environ["TMPDIR"] = env["TMPDIR"]  # the JVM's spark-local dirs go with the run
    gateway = launch_gateway(SparkConf(loadDefaults=False).setAll(list(settings.items())))
    env["PYSPARK_GATEWAY_PORT"] = str(gateway.gateway_parameters.port)
    env["PYSPARK_GATEWAY_SECRET"] = gateway.gateway_parameters.auth_token
    print(f"one Spark JVM for every mutant: pid {gateway.proc.pid}")
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            gateway.shutdown()
        gateway.proc.stdin.close()  # PySpark's gateway server exits on EOF of its stdin
        try:
            gateway.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            gateway.proc.kill()
            gateway.proc.wait()


def stop_left_servers(scratch: Path) -> None:
    """Stop PostgreSQL servers that tests of a timed-out mutant left in ``scratch``."""
    for pid_file in scratch.glob("millrace-pg-*/data/postmaster.pid"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int(pid_file.read_text().splitlines()[0])
            os.kill(pid, signal.SIGQUIT)  # immediate shutdown
            deadline = time.monotonic() + 10
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, signal.SIGKILL)
            print(f"stopped PostgreSQL {pid} left by a mutant's tests in {pid_file.parent}")


def results() -> dict[str, dict[str, str]]:
    """Source file -> mutant name -> status, from mutmut's ``.meta`` files."""
    from mutmut.stats import status_by_exit_code

    found = {}
    for meta in sorted(MUTANTS.glob("src/**/*.py.meta")):
        source = str(meta.relative_to(MUTANTS))[: -len(".meta")]
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        if codes:
            found[source] = {name: status_by_exit_code[code] for name, code in codes.items()}
    return found


def count(statuses: list[str]) -> Counter[str]:
    tally = Counter(mutants=len(statuses))
    for status in statuses:
        column = status if status in COLUMNS else "other"
        tally[column] += 1
    return tally


def report() -> int:
    """Print the table per module and per file, and the names of the survivors."""
    found = results()
    if not found:
        print("no mutmut results in mutants/: run `make mutation` first")
        return 1
    header = f"{'module / file':52}" + "".join(f"{c:>10}" for c in COLUMNS) + f"{'% killed':>10}"
    print(header)
    print("-" * len(header))
    everything: list[str] = []
    for module, prefix in MODULES.items():
        files = {f: s for f, s in found.items() if f.startswith(prefix)}
        statuses = [s for by_name in files.values() for s in by_name.values()]
        everything += statuses
        print(_row(module, count(statuses)))
        if len(files) > 1:
            for source, by_name in files.items():
                print(_row("  " + source.removeprefix(prefix), count(list(by_name.values()))))
    print("-" * len(header))
    print(_row("all", count(everything)))
    left = sorted(
        name
        for by_name in found.values()
        for name, status in by_name.items()
        if status not in ("killed",)
    )
    print(f"\nnot killed ({len(left)}):")
    for name in left:
        status = next(s[name] for s in found.values() if name in s)
        print(f"  {status:9} {name}")
    return 0


def _row(label: str, tally: Counter[str]) -> str:
    share = 100 * tally["killed"] / tally["mutants"] if tally["mutants"] else 0.0
    return f"{label:52}" + "".join(f"{tally[c]:>10}" for c in COLUMNS) + f"{share:>9.1f}%"


def survivors() -> int:
    """Every mutant not killed, with its diff (``mutmut show``)."""
    for by_name in results().values():
        for name, status in sorted(by_name.items()):
            if status != "killed":
                shown = subprocess.run(
                    [str(MUTMUT), "show", name], cwd=ROOT, capture_output=True, text=True
                )
                print(shown.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
