"""What the store says about itself (`store_info`): its schema version and the shape
of its rollups; and the error for a store that cannot be opened as it is."""

from __future__ import annotations

import uuid

from sqlalchemy import Connection, insert, select
from sqlalchemy.exc import SQLAlchemyError

from robot_memory.errors import StoreFailure
from robot_memory.store.schema import RollupShape, store_info

# store_info keys of the RollupShape
ROLLUP_KEYS = {"block": "rollup_block", "bucket_ns": "rollup_bucket_ns"}

# store_info key of the id a store is given when it is created: every node of a stack
# must have opened the same store (a split stack is refused, ros/managed_node.py).
STORE_ID_KEY = "store_id"

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


def store_id_of(conn: Connection) -> str | None:
    """The id the store was given when it was created (None for an older store that has
    none yet)."""
    return conn.execute(select(store_info.c.value).where(
        store_info.c.key == STORE_ID_KEY)).scalar()


def give_store_id(conn: Connection) -> None:
    """Give the store an id if it has none. A fleet's runtime role may not write
    store_info: the store then stays without one until its owner opens it."""
    if store_id_of(conn) is not None:
        return
    try:
        with conn.begin_nested():
            conn.execute(insert(store_info).values(key=STORE_ID_KEY, value=uuid.uuid4().hex))
    except SQLAlchemyError:
        pass
