"""Where fleet priors come from, checked before any of them is served (docs/priors.md).

A source is one of:
- an evidence bundle directory exported by a sibling (`robot-memory export-bundle`):
  verified offline (checksums, hash chain, facts rebuilt from its events), its manifest
  must hash to the bundle's identity and declare this robot's embodiment;
- a PostgreSQL URL of a priors reader (`robot-memory db add-priors-reader`): the
  database's row-level security lets that role read the facts, never the events, of the
  identities registered with this robot's embodiment; the query asks for the same.

The embodiment is the manifest's own field, already a hash input: declaring it moves no
identity hash, and a robot cannot claim another embodiment without another identity.
A source that fails its check is refused with the reason and the others are still used.
ROS-free.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import create_engine, text

from robot_memory.canonical import canonical_json
from robot_memory.errors import InputError
from robot_memory.evidence.bundle_format import FACTS, INFO, MANIFEST
from robot_memory.evidence.bundle_verify import verify_bundle
from robot_memory.manifest import load_manifest
from robot_memory.grounding.priors import PRIOR_KIND, PriorFact
from robot_memory.store import FactRow

FLEET_ORIGIN = "fleet"
EMBODIMENTS_TABLE = "robot_embodiments"  # written by the owner only (store/roles.py)


class PriorsError(InputError):
    """Raised for a priors source that cannot be used: a bundle that does not verify,
    whose manifest does not hash to its identity or declares another embodiment, this
    robot's own identity, or a store that cannot be read."""


@dataclass
class LoadedPriors:
    """The facts of every usable source, and why each refused source was refused."""

    facts: list[PriorFact] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def is_fleet_url(source: str) -> bool:
    return source.startswith("postgresql")


def load_priors(sources: list[str], own_identity: str, embodiment: str) -> LoadedPriors:
    loaded = LoadedPriors()
    for source in sources:
        try:
            if is_fleet_url(source):
                loaded.facts += fleet_priors(source, own_identity, embodiment)
            else:
                loaded.facts += bundle_priors(Path(source), own_identity, embodiment)
        except InputError as exc:
            loaded.refused.append(str(exc))
    return loaded


def bundle_priors(root: Path, own_identity: str, embodiment: str) -> list[PriorFact]:
    """The active skill_success_rate facts of a verified sibling's bundle."""
    verdict = verify_bundle(root)
    if not verdict.ok:
        raise PriorsError(f"priors bundle {root} does not verify: {verdict.problems[0]}")
    info = json.loads((root / INFO).read_text(encoding="utf-8"))
    identity = str(info["identity_hash"])
    manifest = load_manifest(root / MANIFEST)
    if manifest.identity_hash() != identity:
        raise PriorsError(f"priors bundle {root}: {MANIFEST} hashes to "
                          f"{manifest.identity_hash()}, not the bundle's identity {identity}")
    if identity == own_identity:
        raise PriorsError(f"priors bundle {root} is this robot's own memory, not a sibling's")
    if manifest.embodiment != embodiment:
        raise PriorsError(f"priors bundle {root}: embodiment {manifest.embodiment!r}, "
                          f"this robot's is {embodiment!r}")
    facts = []
    for line in (root / FACTS).read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry["kind"] != PRIOR_KIND:
            continue
        fact = FactRow(id=0, kind=entry["kind"], key=entry["key"],
                       value_json=canonical_json(entry["value"]), status=entry["status"],
                       confidence=entry["confidence"], n_observations=entry["n_observations"],
                       rule_version=entry["rule_version"], last_supporting_event_id=0,
                       last_updated_ns=entry["last_updated_ns"])
        facts.append(PriorFact(identity, manifest.agent_id, str(root), fact))
    return facts


_FLEET_FACTS = text(
    "SELECT f.identity_hash, e.agent_id, f.id, f.fact_kind, f.fact_key, f.fact_value_json, "
    "f.status, f.confidence, f.n_observations, f.rule_version, "
    "f.last_supporting_event_id, f.last_updated_ns "
    f"FROM semantic_facts f JOIN {EMBODIMENTS_TABLE} e ON e.identity_hash = f.identity_hash "
    "WHERE e.embodiment = :embodiment AND f.identity_hash <> :own "
    "AND f.fact_kind = :kind AND f.status = 'active' "
    "ORDER BY f.identity_hash, f.fact_key")


def fleet_priors(url: str, own_identity: str, embodiment: str) -> list[PriorFact]:
    """The active skill_success_rate facts of the same embodiment's other identities,
    read as the priors reader the URL logs in as (the database limits what it sees)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(_FLEET_FACTS, {"embodiment": embodiment, "own": own_identity,
                                               "kind": PRIOR_KIND}).all()
    except Exception as exc:  # the driver's errors differ; what the operator needs is here
        raise PriorsError(f"priors store {engine.url.render_as_string(hide_password=True)}: "
                          f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from exc
    finally:
        engine.dispose()
    return [PriorFact(row.identity_hash, row.agent_id or "", FLEET_ORIGIN,
                      FactRow(id=row.id, kind=row.fact_kind, key=row.fact_key,
                              value_json=row.fact_value_json, status=row.status,
                              confidence=row.confidence, n_observations=row.n_observations,
                              rule_version=row.rule_version,
                              last_supporting_event_id=row.last_supporting_event_id,
                              last_updated_ns=row.last_updated_ns))
            for row in rows]
