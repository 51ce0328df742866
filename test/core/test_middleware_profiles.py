"""The node processes use our Fast DDS profile only where it is theirs to choose: with
rmw_fastrtps, and when the user has set no Fast DDS profile of their own."""

import xml.etree.ElementTree as ET

import pytest

from robot_memory.operation.middleware import PROFILES, use_fastdds_profiles


@pytest.mark.parametrize("distro, variable", [
    ("kilted", "FASTDDS_DEFAULT_PROFILES_FILE"), ("rolling", "FASTDDS_DEFAULT_PROFILES_FILE"),
    ("jazzy", "FASTRTPS_DEFAULT_PROFILES_FILE"), ("humble", "FASTRTPS_DEFAULT_PROFILES_FILE")])
def test_the_default_rmw_gets_the_profile_file_under_the_name_its_fast_dds_reads(
        distro, variable):
    environ = {"ROS_DISTRO": distro}
    assert use_fastdds_profiles(environ)
    assert environ == {"ROS_DISTRO": distro, variable: str(PROFILES),
                       "RMW_FASTRTPS_USE_QOS_FROM_XML": "1"}
    assert use_fastdds_profiles({"RMW_IMPLEMENTATION": "rmw_fastrtps_dynamic_cpp"})


def test_from_pypi_the_name_follows_rclpys_version():
    from importlib import metadata
    environ = {}
    use_fastdds_profiles(environ)
    major = int(metadata.version("ros-rclpy").split(".")[0])
    assert (("FASTRTPS_DEFAULT_PROFILES_FILE" in environ) == (major < 9)
            and ("FASTDDS_DEFAULT_PROFILES_FILE" in environ) == (major >= 9))


@pytest.mark.parametrize("environ", [
    {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"},
    {"FASTDDS_DEFAULT_PROFILES_FILE": "/etc/robot/fastdds.xml"},
    {"FASTRTPS_DEFAULT_PROFILES_FILE": "/etc/robot/fastdds.xml"},
    {"RMW_FASTRTPS_USE_QOS_FROM_XML": "0"}])
def test_another_rmw_or_the_users_own_profile_is_left_alone(environ):
    before = dict(environ)
    assert not use_fastdds_profiles(environ)
    assert environ == before


def test_the_profile_frees_reader_samples_and_keeps_rmw_fastrtps_writer_defaults():
    ns = {"p": "http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles"}
    root = ET.parse(PROFILES).getroot()
    reader = root.find("p:data_reader[@is_default_profile='true']", ns)
    writer = root.find("p:data_writer[@is_default_profile='true']", ns)
    assert reader.find("p:historyMemoryPolicy", ns).text == "DYNAMIC"
    assert writer.find("p:historyMemoryPolicy", ns).text == "PREALLOCATED_WITH_REALLOC"
    assert writer.find("p:qos/p:publishMode/p:kind", ns).text == "SYNCHRONOUS"
    for entity in (reader, writer):
        assert entity.find("p:qos/p:data_sharing/p:kind", ns).text == "OFF"
