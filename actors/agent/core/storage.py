"""The storage fingerprint: the disk a node offers, as Nomad's client reports it.

Nomad's storage fingerprint looks at the file system holding the client's allocation
directory and reports its device as `unique.storage.volume`, its size and free space in
bytes as `unique.storage.bytestotal` / `unique.storage.bytesfree`, and the free space in MB
as the node's DiskMB. drover does the same for the agent's data directory.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

MB = 1024 * 1024
MOUNTS = Path("/proc/mounts")


@dataclass(frozen=True, slots=True)
class Storage:
    """A file system: its device (volume), size and free space in bytes."""

    volume: str
    bytes_total: int
    bytes_free: int

    @property
    def disk_mb(self) -> int:
        """What the node offers to allocations: the free space, in MB (Nomad's DiskMB)."""
        return self.bytes_free // MB

    def attributes(self) -> dict[str, str]:
        return {
            "unique.storage.volume": self.volume,
            "unique.storage.bytestotal": str(self.bytes_total),
            "unique.storage.bytesfree": str(self.bytes_free),
        }


def storage_of(path: str | os.PathLike[str], mounts: Path = MOUNTS) -> Storage:
    """The file system holding `path` (the nearest existing folder at or above it, so a data
    directory not made yet is measured where it will be). Raises OSError if none can be
    measured."""
    where = Path(path).resolve()
    while not where.exists() and where != where.parent:
        where = where.parent
    usage = shutil.disk_usage(where)
    if usage.free > usage.total:
        raise OSError(f"{where}: more free disk space ({usage.free}) than in all ({usage.total})")
    return Storage(_volume(where, mounts), usage.total, usage.free)


def _volume(path: Path, mounts: Path) -> str:
    """The device mounted at the longest mount point above `path` (what `df` names as the
    file system); the mount point itself where the mount table cannot be read."""
    try:
        lines = mounts.read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    best, device = "", ""
    text = str(path)
    for line in lines:
        fields = line.split()
        if len(fields) < 2:
            continue
        point = _unescape(fields[1])
        inside = text == point or text.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, device = point, _unescape(fields[0])
    if device:
        return device
    mount = path
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    return str(mount)


def _unescape(field: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash as octal escapes (\\040 ...)."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        octal = field[i + 1 : i + 4]
        if field[i] == "\\" and len(octal) == 3 and all(c in "01234567" for c in octal):
            out.append(chr(int(octal, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)
