"""A reset's archive asked for over the `override` service stays inside the archive
folder: a path leading out of it (absolute elsewhere, `..`, a symlink) is refused, and
nothing is created outside."""

import os

import pytest

from robot_memory.consolidation.override_records import OverrideError
from robot_memory.consolidation.reset_archive import archive_path_inside


@pytest.fixture
def folder(tmp_path):
    inside = tmp_path / "memory.db.segments"
    inside.mkdir()
    return inside


def test_names_and_paths_inside_are_taken_there(folder):
    assert archive_path_inside(folder, "", "default.json") == folder.resolve() / "default.json"
    assert archive_path_inside(folder, "r1.json", "d") == folder.resolve() / "r1.json"
    assert archive_path_inside(folder, "resets/r1.json", "d") == \
        folder.resolve() / "resets" / "r1.json"
    assert archive_path_inside(folder, str(folder / "r2.json"), "d") == \
        folder.resolve() / "r2.json"


@pytest.mark.parametrize("requested", ["/etc/cron.d/x", "../x.json", "a/../../x.json",
                                       "resets/../r.json", ".", "/"])
def test_paths_out_of_the_folder_are_refused(folder, requested):
    with pytest.raises(OverrideError, match="archive_path"):
        archive_path_inside(folder, requested, "d")


def test_a_symlink_out_of_the_folder_is_refused(folder, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, folder / "link")
    with pytest.raises(OverrideError, match="leads out of the archive folder"):
        archive_path_inside(folder, "link/x.json", "d")
    os.symlink(tmp_path / "target.json", folder / "file_link.json")
    with pytest.raises(OverrideError, match="leads out of the archive folder"):
        archive_path_inside(folder, "file_link.json", "d")
    assert sorted(p.name for p in outside.iterdir()) == []
    assert not (tmp_path / "target.json").exists()
