"""The HA storage directory (``high-availability.storageDir``, any fsspec URL): the payloads
ZooKeeper's znodes point to. Files are written whole (temporary name, then renamed), so a
reader never sees a half-written one."""

from __future__ import annotations

import posixpath

import fsspec

from millrace.config import Configuration, HighAvailabilityOptions
from millrace.errors import HighAvailabilityError
from millrace.types import new_id

__all__ = ["HaStorage"]


class HaStorage:
    """Files under ``<storageDir>/<cluster-id>/``.

    Args:
        url: The storage directory (a path or an fsspec URL).
        cluster_id: The cluster's id (leading and trailing ``/`` dropped).

    Raises:
        HighAvailabilityError: From every method, naming the path, if the storage fails.

    Threading:
        Any thread (blocking I/O: never on an endpoint's main thread).
    """

    def __init__(self, url: str, cluster_id: str) -> None:
        self._fs, root = fsspec.core.url_to_fs(url)
        self.root = posixpath.join(root, cluster_id.strip("/"))

    @classmethod
    def from_configuration(cls, configuration: Configuration) -> HaStorage:
        return cls(
            configuration.get(HighAvailabilityOptions.STORAGE_DIR),
            configuration.get(HighAvailabilityOptions.CLUSTER_ID),
        )

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def write(self, path: str, data: bytes) -> None:
        """Write ``data`` at ``path`` whole."""
        temporary = f"{path}.{new_id()[:8]}.tmp"
        try:
            self._fs.makedirs(posixpath.dirname(path), exist_ok=True)
            with self._fs.open(temporary, "wb") as out:
                out.write(data)
            self._fs.mv(temporary, path)
        except OSError as error:
            raise HighAvailabilityError(f"cannot write {path}: {error}", path) from error

    def read(self, path: str) -> bytes:
        try:
            with self._fs.open(path, "rb") as source:
                data: bytes = source.read()
                return data
        except OSError as error:
            raise HighAvailabilityError(f"cannot read {path}: {error}", path) from error

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(path))

    def names(self, directory: str) -> list[str]:
        """The file names in ``directory`` (none if it does not exist)."""
        if not self._fs.exists(directory):
            return []
        return sorted(
            posixpath.basename(p.rstrip("/")) for p in self._fs.ls(directory, detail=False)
        )

    def remove(self, path: str) -> None:
        """Delete ``path`` if it exists."""
        try:
            if self._fs.exists(path):
                self._fs.rm(path)
        except OSError as error:
            raise HighAvailabilityError(f"cannot remove {path}: {error}", path) from error
