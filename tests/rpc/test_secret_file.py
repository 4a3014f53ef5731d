"""The cluster secret's file (issue 9, case 8): created whole or not at all when many processes
start at once, never read through a symbolic link or from another user's file."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from millrace.config import Configuration
from millrace.errors import ConfigError
from millrace.rpc.tcp.transport_security import TransportSecurity
from tests.real_parts import part_unavailable

WAIT = 30.0


def secret_of(directory: Path, create: bool = True) -> bytes:
    configuration = Configuration({"io.tmp.dirs": str(directory)})
    return TransportSecurity.from_configuration(configuration, create_secret=create).secret


def test_simultaneous_starts_all_read_the_one_secret(tmp_path) -> None:
    starts, rounds = 12, 40
    failures: list[str] = []
    with ThreadPoolExecutor(max_workers=starts) as pool:
        for round_number in range(rounds):
            directory = tmp_path / f"round-{round_number}"
            barrier = threading.Barrier(starts)

            def start(index: int, directory: Path = directory, barrier=barrier) -> bytes:
                barrier.wait(WAIT)
                # Half create the file (JobManagers), half only read it (TaskManagers).
                return secret_of(directory, create=index % 2 == 0)

            outcomes = [pool.submit(start, i) for i in range(starts)]
            secrets_seen = set()
            for outcome in outcomes:
                error = outcome.exception(WAIT)
                if error is None:
                    secrets_seen.add(outcome.result(WAIT))
                elif not (
                    isinstance(error, ConfigError) and "start the cluster first" in str(error)
                ):
                    failures.append(f"round {round_number}: {error}")  # not 'missing': broken
            assert len(secrets_seen) <= 1, f"round {round_number}: {len(secrets_seen)} secrets"
            leftovers = [p.name for p in (directory / "cluster").iterdir() if p.name != "secret"]
            assert leftovers == [], f"temporary files left behind: {leftovers}"
    assert failures == [], f"{len(failures)} of {starts * rounds} starts failed: {failures[:3]}"


def test_a_symbolic_link_in_place_of_the_secret_file_is_refused(tmp_path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("0123456789abcdef0123456789abcdef\n")
    os.chmod(target, 0o600)
    link = tmp_path / "secret"
    link.symlink_to(target)
    configuration = Configuration({"security.cluster-secret.file": str(link)})
    with pytest.raises(ConfigError, match="not a symbolic link"):
        TransportSecurity.from_configuration(configuration)
    with pytest.raises(ConfigError, match="not a symbolic link"):  # nor is it replaced
        TransportSecurity.from_configuration(configuration, create_secret=True)


def test_a_secret_file_of_another_user_is_refused(tmp_path) -> None:
    if os.geteuid() != 0:
        part_unavailable(
            "root (to give the file to another user)", f"running as uid {os.geteuid()}"
        )
    path = tmp_path / "secret"
    path.write_text("0123456789abcdef0123456789abcdef\n")
    os.chmod(path, 0o600)
    os.chown(path, 65534, 65534)
    configuration = Configuration({"security.cluster-secret.file": str(path)})
    with pytest.raises(ConfigError, match="owned by this process's user"):
        TransportSecurity.from_configuration(configuration)


def test_a_directory_in_place_of_the_secret_file_is_refused(tmp_path) -> None:
    (tmp_path / "secret").mkdir(mode=0o700)
    configuration = Configuration({"security.cluster-secret.file": str(tmp_path / "secret")})
    with pytest.raises(ConfigError, match="regular file"):
        TransportSecurity.from_configuration(configuration)


def test_the_secret_may_come_from_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MILLRACE_CLUSTER_SECRET", "from-the-environment-0123456789")
    assert secret_of(tmp_path, create=False) == b"from-the-environment-0123456789"
    assert not (tmp_path / "cluster" / "secret").exists()
