"""``millrace cluster token``: the REST bearer token of this machine's cluster secret, as the
dashboard's token field takes it; a clear error where no secret exists."""

from __future__ import annotations

from millrace.config import Configuration
from millrace.rpc.tcp.transport_security import TransportSecurity
from millrace.runtime.dispatcher.rest_endpoint import rest_token
from tests.integration.helpers import run_cli


def test_the_token_is_the_rest_token_of_the_cluster_secret(tmp_path) -> None:
    settings = ["-D", f"io.tmp.dirs={tmp_path / 'tmp'}"]
    missing = run_cli(["cluster", "token", *settings], cwd=tmp_path, timeout=60)
    assert missing.returncode == 1 and "no cluster secret here" in missing.stdout
    conf = Configuration({"io.tmp.dirs": str(tmp_path / "tmp")})
    secret = TransportSecurity.from_configuration(conf, create_secret=True).secret
    printed = run_cli(["cluster", "token", *settings], cwd=tmp_path, timeout=60)
    assert printed.returncode == 0, printed.stdout + printed.stderr
    assert printed.stdout.strip() == rest_token(secret)
