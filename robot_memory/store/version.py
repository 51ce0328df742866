"""What the store says about itself (`store_info`): its schema version and the shape
of its rollups; and the error for a store that cannot be opened as it is."""

from __future__ import annotations

from sqlalchemy import Connection, insert, select

from robot_memory.errors import StoreFailure
from robot_memory.store.schema import RollupShape, store_info

# store_info keys of the RollupShape
ROLLUP_KEYS = {"block": "rollup_block", "bucket_ns": "rollup_bucket_ns"}

SCHEMA_LOCK_KEY = 0x524D454D  # pg_advisory_xact_lock key for schema creation and migration


class StoreError(StoreFailure):
    """Raised when the store cannot be opened or has an unknown schema version."""


def schema_version(conn: Connection) -> int | None:
    """The store's schema version (None for a store that has none recorded yet)."""
    value = conn.execute(select(store_info.c.value).where(
        store_info.c.key == "schema_version")).scalar()
    return None if value is None else int(value)


def rollup_shape_of(conn: Connection) -> RollupShape:
    """The store's RollupShape (store_info)."""
    stored = dict(conn.execute(select(store_info.c.key, store_info.c.value).where(
        store_info.c.key.in_(ROLLUP_KEYS.values()))).all())
    return RollupShape(**{field: int(stored[key]) for field, key in ROLLUP_KEYS.items()})


def record_rollup_shape(conn: Connection, shape: RollupShape) -> None:
    conn.execute(insert(store_info), [{"key": key, "value": str(int(getattr(shape, field)))}
                                      for field, key in ROLLUP_KEYS.items()])
