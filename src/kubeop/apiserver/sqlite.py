"""SQLiteStorage: a :class:`~kubeop.apiserver.memory.MemoryStorage` whose objects, versions and
change history are also kept in one SQLite file, so a restarted server serves the same objects,
continues the same resourceVersions, and lets watches resume from versions made before the
restart (within the kept history).

Every write is one SQLite transaction (the object, the change, the version), committed before
the write is applied in memory and announced to watchers; a write SQLite refuses is a 500 and
changes nothing. Reads and watches are served from memory. One process at a time: the file is
locked while it is open (a second storage on it fails at once with a clear error).

The transactions run on the event loop (WAL, ``synchronous=FULL``: a fraction of a millisecond to
a few milliseconds each on a local disk); keep the file on a local disk.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson

from kubeop.apiserver.memory import MemoryStorage, _Change
from kubeop.apiserver.status import StatusError

__all__ = ["SQLiteStorage"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (resource, namespace, name)
);
CREATE TABLE IF NOT EXISTS changes (
    version INTEGER PRIMARY KEY, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    old BLOB, new BLOB
);
CREATE TABLE IF NOT EXISTS versions (id INTEGER PRIMARY KEY CHECK (id = 1), latest INTEGER NOT NULL,
    compacted INTEGER NOT NULL);
INSERT OR IGNORE INTO versions VALUES (1, 0, 0);
"""


class SQLiteStorage(MemoryStorage):
    """Objects in memory, kept in the SQLite file ``path``; see the module docstring."""

    def __init__(self, path: str | Path, *, history: int = 10_000, watch_queue: int = 1_000) -> None:
        super().__init__(history=history, watch_queue=watch_queue)
        self.path = Path(path)
        try:
            db = sqlite3.connect(self.path, timeout=0.5, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA locking_mode=EXCLUSIVE")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.executescript(_SCHEMA)  # the first write takes the lock, held until close
        except sqlite3.Error as exc:
            raise RuntimeError(
                f"SQLiteStorage cannot open {self.path}: {exc} (another server holding it, or not a "
                "SQLite file this storage made)"
            ) from None
        self._db = db
        latest, compacted = db.execute("SELECT latest, compacted FROM versions").fetchone()
        objects = [
            (resource, (namespace, name), orjson.loads(data))
            for resource, namespace, name, data in db.execute(
                "SELECT resource, namespace, name, data FROM objects"
            )
        ]
        changes = [
            _Change(version, resource, (namespace, name), _load(old), _load(new))
            for version, resource, namespace, name, old, new in db.execute(
                "SELECT version, resource, namespace, name, old, new FROM changes ORDER BY version"
            )
        ]
        self._restore(objects, changes, latest, compacted)

    def __repr__(self) -> str:
        return f"<SQLiteStorage {self.path} at version {self.resource_version}>"

    def _persist(self, change: _Change) -> None:
        namespace, name = change.key
        oldest = change.resource_version - self._history_size
        try:
            db = self._db
            db.execute("BEGIN")
            if change.new is None:
                db.execute(
                    "DELETE FROM objects WHERE resource = ? AND namespace = ? AND name = ?",
                    (change.resource, namespace, name),
                )
            else:
                db.execute(
                    "INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?)",
                    (change.resource, namespace, name, orjson.dumps(change.new)),
                )
            db.execute(
                "INSERT INTO changes VALUES (?, ?, ?, ?, ?, ?)",
                (
                    change.resource_version,
                    change.resource,
                    namespace,
                    name,
                    _dump(change.old),
                    _dump(change.new),
                ),
            )
            db.execute("DELETE FROM changes WHERE version <= ?", (oldest,))
            db.execute(
                "UPDATE versions SET latest = ?, compacted = MAX(compacted, ?)",
                (change.resource_version, oldest),
            )
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise StatusError(500, f"the write could not be stored: {exc}") from None

    def compact(self) -> None:
        """Forget the whole history, in the file too: older versions become 410."""
        super().compact()
        self._db.execute("BEGIN")
        self._db.execute("DELETE FROM changes")
        self._db.execute("UPDATE versions SET compacted = latest")
        self._db.execute("COMMIT")

    async def close(self) -> None:
        """End every watch and close the database file."""
        await super().close()
        self._db.close()


def _dump(obj: dict[str, Any] | None) -> bytes | None:
    return None if obj is None else orjson.dumps(obj)


def _load(data: bytes | None) -> dict[str, Any] | None:
    return None if data is None else orjson.loads(data)
