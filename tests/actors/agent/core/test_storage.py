"""The storage fingerprint: the data directory's file system, as Nomad's client reports it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from actors.agent.core.storage import MB, Storage, storage_of


def test_storage_of_measures_the_file_system_holding_the_path(tmp_path: Path) -> None:
    storage = storage_of(tmp_path)
    usage = shutil.disk_usage(tmp_path)
    assert storage.bytes_total == usage.total > 0
    # Free space moves as others write; it stays within what the file system holds.
    assert 0 < storage.bytes_free <= storage.bytes_total
    assert abs(storage.bytes_free - usage.free) < 1024 * MB
    assert storage.disk_mb == storage.bytes_free // MB
    assert storage.volume  # the device (/proc/mounts) or the mount point
    assert storage.attributes() == {
        "unique.storage.volume": storage.volume,
        "unique.storage.bytestotal": str(storage.bytes_total),
        "unique.storage.bytesfree": str(storage.bytes_free),
    }


def test_a_data_directory_not_made_yet_is_measured_where_it_will_be(tmp_path: Path) -> None:
    later = storage_of(tmp_path / "not" / "made" / "yet")
    assert later.bytes_total == shutil.disk_usage(tmp_path).total
    assert not (tmp_path / "not").exists()  # measuring makes nothing


def test_the_volume_is_the_device_at_the_longest_mount_point(tmp_path: Path) -> None:
    data = tmp_path / "data dir"
    data.mkdir()
    mounts = tmp_path / "mounts"
    escaped = str(tmp_path).replace(" ", "\\040") + "/data\\040dir"
    mounts.write_text(
        "/dev/root / ext4 rw 0 0\n"
        f"/dev/nvme\\0401 {escaped} xfs rw 0 0\n"
        f"tmpfs {tmp_path}/data ext4 rw 0 0\n"  # a prefix of the name, not a folder above
        "garbage\n",
        encoding="utf-8",
    )
    assert storage_of(data / "allocs", mounts).volume == "/dev/nvme 1"
    assert storage_of(tmp_path, mounts).volume == "/dev/root"


def test_without_a_mount_table_the_volume_is_the_mount_point(tmp_path: Path) -> None:
    volume = storage_of(tmp_path, tmp_path / "no-such-mounts").volume
    assert Path(volume).is_dir() and (volume == "/" or str(tmp_path).startswith(volume))


@pytest.mark.parametrize("free", [0, 5 * MB])
def test_disk_mb_rounds_the_free_space_down(free: int) -> None:
    assert Storage("/dev/x", 10 * MB, free + MB - 1).disk_mb == free // MB
