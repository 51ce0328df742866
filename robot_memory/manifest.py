"""The robot's identity manifest and its SHA-256 identity hash.

The hash input is exactly the seven manifest fields below, canonically serialised.
Nothing the store or the consolidator writes is a field here, so no amount of
learning can move the hash (Lemma 1 of the paper "Episodic-to-Semantic
Consolidation Without Identity Drift").
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from robot_memory.canonical import canonical_json, sha256_hex
from robot_memory.errors import InputError, yaml_problem

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class ManifestError(InputError):
    """Raised when a manifest file is missing, unreadable, not YAML, or has unknown,
    missing or mistyped fields; or when a certified hash is not 64 hex digits."""


class IdentityManifest(BaseModel):
    """Who the robot is. Frozen; unknown and missing fields are rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    agent_id: str
    embodiment: str
    capability_registry_hash: str
    policy_version: str
    safety_envelope_hash: str
    planner_contract_version: str
    operator: str

    @field_validator("*")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    def canonical(self) -> str:
        """The canonical JSON of the seven fields: the exact bytes the hash is taken over."""
        return canonical_json(self.model_dump())

    def identity_hash(self) -> str:
        """SHA-256 (64 lowercase hex digits) of `canonical()`: the robot's identity."""
        return sha256_hex(self.canonical())


def load_manifest(path: str | Path) -> IdentityManifest:
    """Read and validate a manifest file.

    Raises ManifestError (an InputError, exit code 3) naming the file and the field when
    the file is missing or unreadable, is not YAML, is not a mapping, or has unknown,
    missing, empty or mistyped fields.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(f"cannot read manifest {path}: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ManifestError(f"manifest {path} is not valid YAML: {yaml_problem(exc)}") from exc
    if not isinstance(data, dict):
        raise ManifestError(f"manifest {path} must be a mapping of the manifest fields")
    try:
        return IdentityManifest.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {_describe(err)}"
            for err in exc.errors()
        )
        raise ManifestError(f"manifest {path} is invalid: {problems}") from exc


def _describe(err: dict) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown field"
    if err["type"] == "missing":
        return "missing field"
    return err["msg"]


def parse_certified_hash(text: str, source: str) -> str:
    """`text` as a certified hash (stripped, lowercase). Raises ManifestError naming
    `source` (a parameter, a file, an option) when it is not 64 hex digits."""
    value = text.strip().lower()
    if not _HEX64.match(value):
        raise ManifestError(f"certified hash from {source} is not 64 hex digits: {text!r}")
    return value


def read_certified_hash(value: str = "", path: str | Path = "") -> str:
    """The certified identity hash, given directly or as the first word of a file.

    Raises ManifestError when neither is given, the file cannot be read, or the value is
    not 64 hex digits."""
    if value:
        return parse_certified_hash(value, "parameter")
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ManifestError(f"cannot read certified hash file {path}: {exc.strerror}") from exc
        words = text.split()
        return parse_certified_hash(words[0] if words else "", str(path))
    raise ManifestError("no certified hash given (set certified_hash or certified_hash_file)")
