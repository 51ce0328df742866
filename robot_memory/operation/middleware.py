"""Fast DDS settings the nodes need and rclpy's QoS cannot express.

A Fast DDS profile file, `config/fastdds_profiles.xml`, gives readers the DYNAMIC history
memory policy (a sample's memory allocated on arrival, freed once taken) and bounds a
reader's history at 100,000 samples; it keeps rmw_fastrtps's other defaults (synchronous
publication, no data sharing). It applies to a node process that uses rmw_fastrtps (the
default RMW) when the user has chosen no Fast DDS profile of their own:
FASTDDS_DEFAULT_PROFILES_FILE, FASTRTPS_DEFAULT_PROFILES_FILE or
RMW_FASTRTPS_USE_QOS_FROM_XML set means theirs wins. Set before rclpy starts the
middleware (entry.run), in the process's own environment. Fast DDS 2 (Humble, Jazzy)
reads the file from FASTRTPS_DEFAULT_PROFILES_FILE only; Fast DDS 3 (Kilted on) from
FASTDDS_DEFAULT_PROFILES_FILE, and warns at every start that the other name is
deprecated: so the name follows the distribution (ROS_DISTRO on a ROS install, rclpy's
version where it came from PyPI), and both are set when neither tells.

Why DYNAMIC: by default (PREALLOCATED_WITH_REALLOC) each slot of a reader's pool keeps,
for the reader's life, the size of the largest sample it has held, so a producer that
sends a few oversized results among the valid ones grows every slot of the logger's
reader to their size, for good. The policy is not a ROS QoS, hence the profile file.
Why 100,000: at Fast DDS's default, 5,000, a logger that fell behind in a burst made the
publishers' KEEP_LAST histories overwrite results. The measurements:
docs/performance.md, "Why the code is shaped this way".
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from importlib import metadata
from pathlib import Path

PROFILES = Path(__file__).resolve().parents[1] / "config" / "fastdds_profiles.xml"
FASTRTPS = ("rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp")
USERS_OWN = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE",
             "RMW_FASTRTPS_USE_QOS_FROM_XML")
FAST_DDS_2_DISTROS = ("humble", "iron", "jazzy")
FIRST_RCLPY_ON_FAST_DDS_3 = 9  # Kilted's rclpy 9.x; Jazzy's is 7.x


def _profile_variables(environ: MutableMapping[str, str]) -> tuple[str, ...]:
    """The variable(s) the installed Fast DDS reads its profile file from."""
    distro = environ.get("ROS_DISTRO", "")
    if distro:
        fast_dds_2 = distro in FAST_DDS_2_DISTROS
    else:
        try:
            major = int(metadata.version("ros-rclpy").split(".")[0])
        except (metadata.PackageNotFoundError, ValueError):
            return ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")
        fast_dds_2 = major < FIRST_RCLPY_ON_FAST_DDS_3
    return ("FASTRTPS_DEFAULT_PROFILES_FILE",) if fast_dds_2 else \
        ("FASTDDS_DEFAULT_PROFILES_FILE",)


def use_fastdds_profiles(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Point Fast DDS at our profile file unless another RMW or the user's own profile
    is in use; True when it did."""
    if environ.get("RMW_IMPLEMENTATION", FASTRTPS[0]) not in FASTRTPS:
        return False
    if any(environ.get(name) for name in USERS_OWN):
        return False
    for variable in _profile_variables(environ):
        environ[variable] = str(PROFILES)
    environ["RMW_FASTRTPS_USE_QOS_FROM_XML"] = "1"  # else rmw overrides the memory policy
    return True
