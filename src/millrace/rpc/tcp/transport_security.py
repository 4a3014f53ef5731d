"""TransportSecurity: the cluster secret and the optional TLS contexts of a TcpRpcService.

Every TCP connection proves the cluster secret before any message is accepted (HMAC challenge,
``connection.py``). The secret comes from ``security.cluster-secret``, else from the file
``security.cluster-secret.file``, which ``millrace cluster start`` creates with 32 random bytes
and mode 0600; other processes of the cluster read it. With ``security.ssl.enabled``,
connections are also encrypted with mutual TLS: each side presents
``security.ssl.certificate`` and accepts only peers whose certificate chains to
``security.ssl.truststore`` (host names are not checked: peers are cluster members named by
address, as with Flink's internal SSL).
"""

from __future__ import annotations

import os
import secrets
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path

from millrace.config import Configuration, SecurityOptions
from millrace.errors import ConfigError

__all__ = ["MIN_SECRET_BYTES", "TransportSecurity"]

MIN_SECRET_BYTES = 16


@dataclass(frozen=True)
class TransportSecurity:
    """What a TcpRpcService needs to authenticate and encrypt its connections.

    Attributes:
        secret: The cluster secret (>= 16 bytes).
        server_ssl: TLS context of accepted connections, or None without TLS.
        client_ssl: TLS context of outgoing connections, or None without TLS.
    """

    secret: bytes
    server_ssl: ssl.SSLContext | None = None
    client_ssl: ssl.SSLContext | None = None

    @classmethod
    def from_configuration(
        cls, configuration: Configuration, *, create_secret: bool = False
    ) -> TransportSecurity:
        """Read (or, with ``create_secret``, create) the secret and build the TLS contexts.

        Args:
            configuration: The ``security.*`` keys.
            create_secret: Create the secret file if it does not exist (cluster start).

        Raises:
            ConfigError: If the secret is missing, too short or readable by others, or a TLS
                file is missing or invalid; names the key and what is expected.
        """
        secret = _read_secret(configuration, create_secret)
        if not configuration.get(SecurityOptions.SSL_ENABLED):
            return cls(secret)
        return cls(secret, *_ssl_contexts(configuration))


def _read_secret(configuration: Configuration, create: bool) -> bytes:
    given = configuration.get(SecurityOptions.CLUSTER_SECRET)
    if given:
        if len(given.encode()) < MIN_SECRET_BYTES:
            raise ConfigError(
                SecurityOptions.CLUSTER_SECRET.key, "<hidden>", f">= {MIN_SECRET_BYTES} bytes"
            )
        return given.encode()
    key = SecurityOptions.CLUSTER_SECRET_FILE.key
    path = Path(configuration.get(SecurityOptions.CLUSTER_SECRET_FILE))
    if not path.exists():
        if not create:
            raise ConfigError(
                key,
                str(path),
                "an existing secret file: start the cluster first ('millrace cluster start') "
                "or copy its secret file here",
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process created it meanwhile: use theirs
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32) + "\n")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise ConfigError(
            key, str(path), f"a file only its owner can read (mode 0600, not {mode:04o})"
        )
    secret = path.read_bytes().strip()
    if len(secret) < MIN_SECRET_BYTES:
        raise ConfigError(key, str(path), f"a file holding a secret of >= {MIN_SECRET_BYTES} bytes")
    return secret


def _ssl_contexts(configuration: Configuration) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    files = {}
    for option in (
        SecurityOptions.SSL_CERTIFICATE,
        SecurityOptions.SSL_KEY,
        SecurityOptions.SSL_TRUSTSTORE,
    ):
        value = configuration.get(option)
        if not value or not Path(value).is_file():
            raise ConfigError(option.key, value, "an existing PEM file (security.ssl.enabled)")
        files[option.key] = value
    certificate = files[SecurityOptions.SSL_CERTIFICATE.key]
    key = files[SecurityOptions.SSL_KEY.key]
    truststore = files[SecurityOptions.SSL_TRUSTSTORE.key]
    try:
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=truststore)
        server.verify_mode = ssl.CERT_REQUIRED  # mutual TLS: clients must present a certificate
        server.load_cert_chain(certificate, key)
        client = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=truststore)
        client.check_hostname = False  # peers are cluster members named by address
        client.load_cert_chain(certificate, key)
    except (ssl.SSLError, OSError) as error:
        raise ConfigError(
            SecurityOptions.SSL_CERTIFICATE.key,
            certificate,
            f"a valid certificate and key ({error})",
        ) from error
    return server, client
