"""Atomic file operations for the file coordinator store: a local tree or an fsspec URL."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import urllib.parse

log = logging.getLogger(__name__)


class LocalFiles:
    """Atomic file operations on a local directory tree."""

    def __init__(self, root: str) -> None:
        self.root = root

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def read(self, *parts: str) -> bytes | None:
        try:
            with open(self.path(*parts), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def _temp(self, directory: str, data: bytes) -> str:
        os.makedirs(directory, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return temp

    def create_exclusive(self, data: bytes, *parts: str) -> bool:
        """Write the file whole and atomically unless it exists; False if it existed."""
        target = self.path(*parts)
        temp = self._temp(os.path.dirname(target), data)
        try:
            os.link(temp, target)  # atomic and fails if the target exists
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(temp)

    def replace(self, data: bytes, *parts: str) -> None:
        target = self.path(*parts)
        os.replace(self._temp(os.path.dirname(target), data), target)

    def delete(self, *parts: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(*parts))

    def names(self, *parts: str) -> list[str]:
        """Entries (files and folders) of a folder, hidden ones left out."""
        try:
            names = os.listdir(self.path(*parts))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [n for n in names if not n.startswith(".")]

    def list(self, *parts: str) -> list[str]:
        return [n for n in self.names(*parts) if n.endswith(".json")]


class FsspecFiles:
    """The same operations on an fsspec filesystem (exclusive create as the backend offers)."""

    def __init__(self, url: str) -> None:
        import fsspec

        self.fs, self.root = fsspec.core.url_to_fs(url)
        self.protocol = url.split("://", 1)[0]

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def read(self, *parts: str) -> bytes | None:
        try:
            with self.fs.open(self.path(*parts), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def create_exclusive(self, data: bytes, *parts: str) -> bool:
        target = self.path(*parts)
        self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        try:
            with self.fs.open(target, "xb") as handle:
                handle.write(data)
            return True
        except FileExistsError:
            return False
        except (NotImplementedError, ValueError):
            log.warning(
                "filesystem %s has no exclusive create; checking existence first (not atomic)",
                self.protocol,
            )
            if self.fs.exists(target):
                return False
            self.fs.pipe_file(target, data)
            return True

    def replace(self, data: bytes, *parts: str) -> None:
        target = self.path(*parts)
        self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        self.fs.pipe_file(target, data)

    def delete(self, *parts: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self.path(*parts))

    def names(self, *parts: str) -> list[str]:
        try:
            entries = self.fs.ls(self.path(*parts), detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        names = [str(e).rstrip("/").rsplit("/", 1)[-1] for e in entries]
        return [n for n in names if not n.startswith(".")]

    def list(self, *parts: str) -> list[str]:
        return [n for n in self.names(*parts) if n.endswith(".json")]


def file_name(identifier: str) -> str:
    """`<quoted identifier>.json` (any id becomes one safe file name)."""
    return urllib.parse.quote(identifier, safe="") + ".json"


def identifier(name: str) -> str:
    """The id of a `file_name` (or of a quoted folder name)."""
    return urllib.parse.unquote(name[: -len(".json")] if name.endswith(".json") else name)


def open_files(url_or_path: str, job_name: str) -> LocalFiles | FsspecFiles:
    """The job's folder `<root>/<job>` on a local path, a file:// URL or another fsspec URL."""
    parsed = urllib.parse.urlparse(str(url_or_path))
    if "://" in str(url_or_path) and parsed.scheme not in ("", "file"):
        return FsspecFiles(str(url_or_path).rstrip("/") + "/" + job_name)
    root = parsed.path if parsed.scheme == "file" else str(url_or_path)
    return LocalFiles(os.path.join(os.path.abspath(os.path.expanduser(root)), job_name))


__all__ = ["FsspecFiles", "LocalFiles", "file_name", "identifier", "open_files"]
