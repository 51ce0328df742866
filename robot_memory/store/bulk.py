"""Driver-level statements: insert many rows of plain columns with one executemany, and
the driver's parameter mark for the plain statements the store writes itself.

The rows appended here have only plain integer and text columns, which need no
conversion, so the statement is compiled once per dialect and the rows go straight to
the driver. Why: SQLAlchemy's executemany builds every row's parameters through its
compiler, which was most of the logger's writing time per event."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table, insert

_compiled: dict[tuple[str, str, tuple[str, ...]], tuple[str, tuple[str, ...] | None]] = {}


def insert_rows(conn: Connection, table: Table, columns: tuple[str, ...],
                rows: list[tuple[Any, ...]]) -> None:
    """INSERT rows (tuples in `columns` order) into `table` in one executemany."""
    if not rows:
        return
    key = (conn.dialect.name, table.name, columns)
    if key not in _compiled:
        compiled = insert(table).compile(dialect=conn.dialect, column_keys=list(columns))
        order = compiled.positiontup
        _compiled[key] = (str(compiled), tuple(order) if order else None)
    sql, order = _compiled[key]
    if order is None:  # named parameters (psycopg)
        params: list = [dict(zip(columns, row)) for row in rows]
    elif tuple(order) == columns:
        params = rows
    else:
        index = [columns.index(name) for name in order]
        params = [tuple(row[i] for i in index) for row in rows]
    conn.exec_driver_sql(sql, params)


def placeholder(conn: Connection) -> str:
    """The driver's parameter mark: `?` (sqlite3) or `%s` (psycopg)."""
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"
