"""Mapping files: how a skill's own result message becomes an ExecutionResult record.

A mapping file (YAML) names, per message type, where each ExecutionResult field comes
from: a field path of the message (`object.class_name`), a constant (`{value: lab}`), or,
for `success`, a comparison (`{field: result_code, equals: 0}`). `parameters` and
`observations` map names to field paths (or name one KeyValue-like array). `stamp`
names a builtin_interfaces/Time field (default `header.stamp` when the message has one);
a zero stamp falls back to the bag's receive time, as for ExecutionResult.

    types:
      acme_msgs/msg/GraspOutcome:
        msg_files: [acme_msgs/msg/GraspOutcome.msg]   # only if the bag lacks definitions
        fields:
          skill_id: {value: manipulation.grasp}
          target_class: object_class
          environment: {value: lab}
          success: {field: result_code, equals: 0}
          failure_reason: error_text
          duration_s: elapsed_s
          parameters: {force_n: grip_force_n}
          observations: {mass_kg: measured_mass_kg}

Every field is checked afterwards exactly as a live ExecutionResult is (intake/admission.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from robot_memory.errors import InputError
from robot_memory.intake.records import InvalidRecord

TEXT_FIELDS = ("skill_id", "target_class", "environment", "zone", "failure_reason",
               "intent_id", "notes", "attempt_id", "amends")
KNOWN_FIELDS = set(TEXT_FIELDS) | {"stamp", "success", "duration_s", "parameters",
                                   "observations"}


class MappingError(InputError):
    """Raised when a mapping file is unreadable or names an unknown field or form;
    the message names the file and the key."""


@dataclass(frozen=True)
class TypeMapping:
    msgtype: str
    fields: dict[str, Any]

    def fields_of(self, msg: Any) -> dict[str, Any]:
        """The mapped fields, to be validated as a live result's are (stamp_ns 0 when the
        message's stamp is zero: not stamped); InvalidRecord (reason mapping_error) when a
        named field is missing from the message."""
        spec = self.fields
        data: dict[str, Any] = {}
        for name in TEXT_FIELDS:
            if name in spec:
                data[name] = self._get(msg, spec[name], name)
        if "duration_s" in spec:
            data["duration_s"] = float(self._get(msg, spec["duration_s"], "duration_s"))
        success = spec["success"]
        if isinstance(success, dict) and "equals" in success:
            data["success"] = self._get(msg, success["field"], "success") == success["equals"]
        else:
            data["success"] = bool(self._get(msg, success, "success"))
        for kind in ("parameters", "observations"):
            if kind in spec:
                data[kind] = self._values(msg, spec[kind], kind)
        stamp_path = spec.get("stamp", "header.stamp" if hasattr(msg, "header") else None)
        stamp_ns = 0
        if stamp_path is not None:
            stamp = self._get(msg, stamp_path, "stamp")
            stamp_ns = int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)
        data["stamp_ns"] = stamp_ns
        return data

    def _values(self, msg: Any, spec: Any, kind: str) -> dict[str, float]:
        if isinstance(spec, str):  # a KeyValue-like array
            return {str(kv.key): float(kv.value) for kv in self._get(msg, spec, kind)}
        return {name: float(self._get(msg, path, f"{kind}.{name}"))
                for name, path in spec.items()}

    def _get(self, msg: Any, spec: Any, field: str) -> Any:
        if isinstance(spec, dict):
            return spec["value"]
        value = msg
        for part in spec.split("."):
            if not hasattr(value, part):
                raise InvalidRecord(field, "mapping_error",
                                    f"{self.msgtype} has no field {spec!r}")
            value = getattr(value, part)
        return value


@dataclass(frozen=True)
class Mapping:
    types: dict[str, TypeMapping]
    msg_files: dict[str, Path]
    sha256: str


def _check_spec(where: str, name: str, spec: Any) -> None:
    if name == "success":
        if isinstance(spec, dict) and set(spec) == {"field", "equals"}:
            return
    elif name in ("parameters", "observations"):
        if isinstance(spec, str) or (isinstance(spec, dict) and all(
                isinstance(v, str) or (isinstance(v, dict) and set(v) == {"value"})
                for v in spec.values())):
            return
    if isinstance(spec, str) and spec:
        return
    if isinstance(spec, dict) and set(spec) == {"value"} and name != "stamp":
        return
    raise MappingError(f"{where}.{name}: expected a field path or {{value: ...}}"
                       + (" or {field: F, equals: V}" if name == "success" else ""))


def load_mapping(path: Path) -> Mapping:
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except (OSError, yaml.YAMLError) as exc:
        raise MappingError(f"{path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("types"), dict) or \
            set(data) - {"types"}:
        raise MappingError(f"{path}: expected a mapping with one key, `types`")
    types, msg_files = {}, {}
    for msgtype, entry in data["types"].items():
        where = f"{path}: types.{msgtype}"
        if not isinstance(entry, dict) or not isinstance(entry.get("fields"), dict) or \
                set(entry) - {"fields", "msg_files"}:
            raise MappingError(f"{where}: expected `fields` (and optionally `msg_files`)")
        fields = entry["fields"]
        unknown = set(fields) - KNOWN_FIELDS
        if unknown:
            raise MappingError(f"{where}.fields: unknown field(s) {sorted(unknown)}; "
                               f"ExecutionResult has {sorted(KNOWN_FIELDS)}")
        for required in ("skill_id", "success"):
            if required not in fields:
                raise MappingError(f"{where}.fields.{required}: required")
        for name, spec in fields.items():
            _check_spec(f"{where}.fields", name, spec)
        for item in entry.get("msg_files", []):
            file = (path.parent / item).resolve()
            if not file.is_file():
                raise MappingError(f"{where}.msg_files: {item}: no such file")
            msg_files[f"{file.parent.parent.name}/msg/{file.stem}"] = file
        types[msgtype] = TypeMapping(msgtype, fields)
    return Mapping(types, msg_files, hashlib.sha256(text.encode("utf-8")).hexdigest())
