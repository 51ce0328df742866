import pytest
import yaml

from robot_memory.manifest import (IdentityManifest, ManifestError, load_manifest,
                                   read_certified_hash)

FIELDS = list(IdentityManifest.model_fields)


def test_manifest_has_the_seven_fields_of_seed_000():
    assert len(FIELDS) == 7


def test_hash_is_sha256_of_canonical_form_and_stable(manifest_file):
    a = load_manifest(manifest_file)
    b = load_manifest(manifest_file)
    assert a.identity_hash() == b.identity_hash()
    assert len(a.identity_hash()) == 64
    assert a.canonical().startswith('{"agent_id":')


def test_key_order_in_the_file_does_not_matter(manifest_file, tmp_path):
    data = yaml.safe_load(manifest_file.read_text())
    reordered = tmp_path / "reordered.yaml"
    reordered.write_text(yaml.safe_dump(dict(reversed(list(data.items()))), sort_keys=False))
    assert load_manifest(reordered).identity_hash() == load_manifest(manifest_file).identity_hash()


@pytest.mark.parametrize("field", FIELDS)
def test_changing_any_field_changes_the_hash(manifest_file, field):
    base = load_manifest(manifest_file)
    changed = base.model_copy(update={field: getattr(base, field) + "-changed"})
    assert changed.identity_hash() != base.identity_hash()


def test_manifest_is_frozen(manifest_file):
    manifest = load_manifest(manifest_file)
    with pytest.raises(Exception):
        manifest.agent_id = "other"


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(extra_field="x"), "extra_field: unknown field"),
    (lambda d: d.pop("operator"), "operator: missing field"),
    (lambda d: d.update(policy_version=3), "policy_version"),
    (lambda d: d.update(agent_id="  "), "agent_id"),
])
def test_bad_manifests_are_rejected_naming_the_field(manifest_file, edit, message):
    data = yaml.safe_load(manifest_file.read_text())
    edit(data)
    manifest_file.write_text(yaml.safe_dump(data))
    with pytest.raises(ManifestError, match=message):
        load_manifest(manifest_file)


def test_unreadable_and_non_mapping_manifests(tmp_path):
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tmp_path / "absent.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ManifestError, match="mapping"):
        load_manifest(tmp_path / "list.yaml")


def test_certified_hash_from_parameter_or_file(tmp_path):
    digest = "ab" * 32
    assert read_certified_hash(digest.upper()) == digest
    (tmp_path / "h").write_text(digest + "  manifest.yaml\n")
    assert read_certified_hash(path=tmp_path / "h") == digest
    with pytest.raises(ManifestError, match="64 hex"):
        read_certified_hash("abc")
    with pytest.raises(ManifestError, match="no certified hash"):
        read_certified_hash()
