"""Downloaded archives (wheels and sdists): names, versions, members, safe extraction,
and where a source tree keeps its top-level modules."""

from __future__ import annotations

import contextlib
import tarfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from agentplug.plugins.manager.reports import PluginManagerError

__all__ = [
    "PreparedDistribution",
    "extract_archive",
    "find_import_roots",
    "normalize_version",
    "prepare_downloads",
    "sdist_version",
]


@dataclass(frozen=True)
class PreparedDistribution:
    """One downloaded distribution, ready for the install checks."""

    path: Path
    name: str
    version: str | None
    files: list[str]

    @property
    def key(self) -> tuple[str, str | None]:
        """(canonical name, normalized version): how pip's install plan names it."""
        return canonicalize_name(self.name), normalize_version(self.version)


def normalize_version(version: str | None) -> str | None:
    """``version`` in its normal form (``1.0.0`` stays ``1.0.0``, ``01.2`` is ``1.2``);
    a version ``packaging`` cannot parse is kept as it is."""
    if version is None:
        return None
    try:
        return str(Version(version))
    except InvalidVersion:
        return version


def prepare_downloads(files: Sequence[Path], wanted: str, spec: str) -> list[PreparedDistribution]:
    """The downloaded distributions, the requested one first, then by name. Fails when
    the requested one is missing or a name comes twice (fail closed)."""
    items = [PreparedDistribution(path, *_inspect_archive(path)) for path in files]
    names = [canonicalize_name(item.name) for item in items]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PluginManagerError(
            f"pip download {spec} produced several files for {', '.join(twice)}"
        )
    root = [item for item in items if canonicalize_name(item.name) == wanted]
    if not root:
        raise PluginManagerError(f"pip download {spec} did not produce {wanted}")
    rest = sorted((i for i in items if i is not root[0]), key=lambda i: i.key[0])
    return [root[0], *rest]


def _inspect_archive(path: Path) -> tuple[str, str | None, list[str]]:
    """Name, version and member list of a downloaded wheel or sdist."""
    name: str
    version: str | None
    try:
        if path.name.endswith(".whl"):
            dist, parsed, _, _ = parse_wheel_filename(path.name)
            name, version = str(dist), str(parsed)
            with zipfile.ZipFile(path) as zf:
                files = zf.namelist()
        else:
            dist, parsed = parse_sdist_filename(path.name)
            name, version = str(dist), str(parsed)
            files = _archive_members(path)
    except (InvalidWheelFilename, InvalidSdistFilename, zipfile.BadZipFile, tarfile.TarError) as e:
        raise PluginManagerError(
            f"downloaded file {path.name} is not a usable package: {e}"
        ) from None
    return name, version, files


def _archive_members(path: Path) -> list[str]:
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path) as zf:
            return zf.namelist()
    with tarfile.open(path) as tf:
        return tf.getnames()


def sdist_version(folder: Path) -> str | None:
    """The version in the name of the sdist downloaded into ``folder`` (``None``: none)."""
    for file in folder.iterdir() if folder.is_dir() else []:
        with contextlib.suppress(InvalidSdistFilename):
            return str(parse_sdist_filename(file.name)[1])
    return None


def extract_archive(archive: Path, dest: Path) -> None:
    """Unpack a zip or tar ``archive`` into the new folder ``dest``; a member that would
    land outside it (or a link out of it) raises :class:`PluginManagerError`."""
    dest.mkdir(parents=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                target = (dest / member).resolve()
                if not target.is_relative_to(dest.resolve()):
                    raise PluginManagerError(f"{archive.name}: unsafe path {member!r}")
            zf.extractall(dest)
        return
    with tarfile.open(archive) as tf:
        try:
            tf.extractall(dest, filter="data")
        except tarfile.FilterError as exc:
            raise PluginManagerError(f"{archive.name}: unsafe archive member ({exc})") from None


def find_import_roots(
    tree: Path, top_level: Sequence[str], subdirectory: str | None = None
) -> list[str]:
    """Folders of ``tree`` (relative) holding the distribution's top-level modules."""
    base = tree
    if subdirectory:
        base = (tree / subdirectory).resolve()
        if not base.is_relative_to(tree.resolve()) or not base.is_dir():
            base = tree
        tree = tree.resolve()
    candidates = [base, base / "src"]
    with contextlib.suppress(OSError):
        candidates += sorted(
            d
            for d in base.iterdir()
            if d.is_dir() and not d.name.startswith((".", "_")) and d.name not in ("src",)
        )
    roots: list[str] = []
    for name in top_level:
        for folder in candidates:
            package = folder / name
            if (
                (package / "__init__.py").is_file()
                or (folder / f"{name}.py").is_file()
                or (package.is_dir() and any(package.glob("*.py")))
            ):
                rel = folder.relative_to(tree).as_posix() or "."
                if rel not in roots:
                    roots.append(rel)
                break
    return roots or ["."]
