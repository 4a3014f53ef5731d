"""TransportSecurity: the cluster secret and the optional TLS contexts of a TcpRpcService.

Every TCP connection proves the cluster secret before any message is accepted (HMAC challenge,
``handshake.py``). The secret comes from ``security.cluster-secret``, else from the environment
variable ``MILLRACE_CLUSTER_SECRET``, else from the file ``security.cluster-secret.file``, which
``millrace cluster start`` creates with 32 random bytes, mode 0600; other processes of the
cluster read it.

The file (issue 9, case 8) is written under a temporary name and linked into place, so a
process starting at the same moment sees no file or the whole one, never a partial one; it is
opened with ``O_NOFOLLOW`` (a symbolic link is refused) and must be a regular file owned by
this process's user and readable by no one else (checked on the opened descriptor).

With ``security.ssl.enabled``,
connections are also encrypted with mutual TLS: each side presents
``security.ssl.certificate`` and accepts only peers whose certificate chains to
``security.ssl.truststore`` (host names are not checked: peers are cluster members named by
address, as with Flink's internal SSL).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path

from millrace.config import Configuration, SecurityOptions
from millrace.errors import ConfigError

__all__ = ["MIN_SECRET_BYTES", "SECRET_ENVIRONMENT_VARIABLE", "TransportSecurity"]

MIN_SECRET_BYTES = 16
SECRET_ENVIRONMENT_VARIABLE = "MILLRACE_CLUSTER_SECRET"
_MAX_SECRET_FILE_BYTES = 4096


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
            ConfigError: If the secret is missing or too short, its file is a symbolic link,
                not a regular file, owned by another user or readable by others, or a TLS
                file is missing or invalid; names the key and what is expected.
        """
        secret = _read_secret(configuration, create_secret)
        if not configuration.get(SecurityOptions.SSL_ENABLED):
            return cls(secret)
        return cls(secret, *_ssl_contexts(configuration))


def _read_secret(configuration: Configuration, create: bool) -> bytes:
    given = configuration.get(SecurityOptions.CLUSTER_SECRET)
    key = SecurityOptions.CLUSTER_SECRET.key
    if not given:
        given = os.environ.get(SECRET_ENVIRONMENT_VARIABLE, "")
        key = SECRET_ENVIRONMENT_VARIABLE
    if given:
        if len(given.encode()) < MIN_SECRET_BYTES:
            raise ConfigError(key, "<hidden>", f">= {MIN_SECRET_BYTES} bytes")
        return given.encode()
    path = Path(configuration.get(SecurityOptions.CLUSTER_SECRET_FILE))
    if create:
        _create_secret_file(path)
    return _read_secret_file(path)


def _create_secret_file(path: Path) -> None:
    """Create ``path`` with a new random secret unless something is there already.

    The secret is written to a temporary name in the same directory and hard-linked into
    place: the link fails if another process created the file meanwhile (theirs wins), and no
    reader ever sees a file without its secret.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if os.path.lexists(path):
        return
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def _read_secret_file(path: Path) -> bytes:
    key = SecurityOptions.CLUSTER_SECRET_FILE.key
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise ConfigError(
            key,
            str(path),
            "an existing secret file: start the cluster first ('millrace cluster start') "
            "or copy its secret file here",
        ) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ConfigError(key, str(path), "a regular file, not a symbolic link") from None
        raise ConfigError(key, str(path), f"a readable secret file ({error})") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise ConfigError(key, str(path), "a regular file")
        if status.st_uid != os.geteuid():
            raise ConfigError(
                key,
                str(path),
                f"a file owned by this process's user (uid {os.geteuid()}), "
                f"not by uid {status.st_uid}",
            )
        mode = stat.S_IMODE(status.st_mode)
        if mode & 0o077:
            raise ConfigError(
                key, str(path), f"a file only its owner can read (mode 0600, not {mode:04o})"
            )
        secret = os.read(fd, _MAX_SECRET_FILE_BYTES + 1).strip()
    finally:
        os.close(fd)
    if not MIN_SECRET_BYTES <= len(secret) <= _MAX_SECRET_FILE_BYTES:
        raise ConfigError(
            key,
            str(path),
            f"a file holding a secret of {MIN_SECRET_BYTES} to {_MAX_SECRET_FILE_BYTES} bytes",
        )
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
