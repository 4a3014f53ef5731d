"""SavepointTargets: where a savepoint asked for by a client may be written (issue 9, case 5).

A client names a target directory (REST ``target-directory``, ``millrace savepoint ID DIR``);
the JobManager writes there with its own rights. The target must lie under one of the allowed
roots, ``state.savepoints.allowed-roots`` (comma-separated), by default only
``state.savepoints.dir``. A relative target is taken under ``state.savepoints.dir``. Paths are
normalized before the comparison (``..`` and, for local paths, symbolic links of existing
directories are resolved), so ``../../..`` cannot climb out; fsspec URLs compare their scheme,
host and normalized path.

Threading:
    Immutable; any thread.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from urllib.parse import urlsplit

from millrace.config import CheckpointingOptions, Configuration
from millrace.errors import CheckpointError

__all__ = ["SavepointTargets"]


def _normalize(location: str) -> str:
    """``location`` as an absolute, normalized path or ``scheme://host/path`` URL."""
    if location.startswith("file://"):
        location = location[len("file://") :]
    parts = urlsplit(location)
    if parts.scheme and "://" in location:
        path = posixpath.normpath("/" + parts.path.lstrip("/"))
        return f"{parts.scheme}://{parts.netloc}{path}"
    return os.path.realpath(os.path.abspath(location))


def _is_url(location: str) -> bool:
    return "://" in location and not location.startswith("file://")


class SavepointTargets:
    """Resolves and confines savepoint targets.

    Args:
        savepoints_dir: ``state.savepoints.dir``: the default target and base of relative ones.
        allowed_roots: ``state.savepoints.allowed-roots``; empty: ``savepoints_dir`` alone.
    """

    def __init__(self, savepoints_dir: str, allowed_roots: Sequence[str] = ()) -> None:
        self.savepoints_dir = savepoints_dir
        self.roots = tuple(_normalize(r) for r in (allowed_roots or [savepoints_dir]) if r)

    @classmethod
    def from_configuration(cls, configuration: Configuration) -> SavepointTargets:
        """From ``state.savepoints.dir`` and ``state.savepoints.allowed-roots``."""
        raw = configuration.get(CheckpointingOptions.SAVEPOINTS_ALLOWED_ROOTS)
        roots = [r.strip() for r in raw.split(",") if r.strip()]
        return cls(configuration.get(CheckpointingOptions.SAVEPOINTS_DIR), roots)

    def resolve(self, target: str | None) -> str:
        """The normalized directory a savepoint for ``target`` goes to.

        Args:
            target: A directory or URL; None or empty: ``state.savepoints.dir``.

        Returns:
            ``target`` made absolute and normalized, under an allowed root.

        Raises:
            CheckpointError: If the target is not a valid path or URL, or lies outside every
                allowed root; names the roots and the keys that set them.
        """
        if not target:
            return self.savepoints_dir
        if "\x00" in target:
            raise CheckpointError("a savepoint target cannot contain a NUL character")
        base = self.savepoints_dir
        if not _is_url(target) and not os.path.isabs(target) and not target.startswith("file:"):
            target = posixpath.join(base, target) if _is_url(base) else os.path.join(base, target)
        try:
            resolved = _normalize(target)
        except ValueError as error:  # e.g. an unbalanced IPv6 bracket in a URL
            raise CheckpointError(f"savepoint target {target!r} is not valid: {error}") from None
        for root in self.roots:
            if resolved == root or resolved.startswith(root.rstrip("/") + "/"):
                return resolved
        raise CheckpointError(
            f"savepoint target {target!r} lies outside the allowed directories "
            f"{', '.join(self.roots)} (state.savepoints.dir, state.savepoints.allowed-roots)"
        )
