"""Where the `override` service may write a reset's archive: inside the consolidator's
archive folder, never elsewhere.

A caller of the service chooses `archive_path`; the node must not let it write, or
create folders, anywhere else on the robot. A relative path is taken inside the folder,
an absolute one must already lead into it; `..` is refused outright, and the path is
resolved (symlinks followed) before it is compared, so a link inside the folder that
points out of it is refused too. The command line (`robot-memory override reset
--archive`) runs with its user's own file access and is not bound by this.
"""

from __future__ import annotations

from pathlib import Path

from robot_memory.consolidation.override_records import OverrideError


def archive_path_inside(folder: Path, requested: str, default_name: str) -> Path:
    """The archive file `requested` names (empty: `default_name`), resolved, inside
    `folder`; OverrideError naming archive_path when it leads out of it."""
    root = Path(folder).expanduser().resolve()
    candidate = Path(requested or default_name)
    if "\0" in requested:
        raise OverrideError("archive_path: contains a NUL character")
    if ".." in candidate.parts:
        raise OverrideError(f"archive_path: {requested!r} contains '..'; give a file name "
                            f"or a path inside the archive folder {root}")
    target = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if target == root or not target.is_relative_to(root):
        raise OverrideError(f"archive_path: {requested!r} leads out of the archive folder "
                            f"{root} (archive_dir); give a file name or a path inside it")
    return target
