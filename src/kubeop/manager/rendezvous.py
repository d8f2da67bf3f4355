"""Rendezvous (highest random weight) hashing: which member of a set owns a key.

Every member scores every key with a hash of ``(member, key)``; the highest score owns it. Each
member gets ``1/n`` of the keys in expectation, and when a member joins or leaves only the keys
it takes or held move (about ``1/n`` of them): the relative order of the other members' scores
for a key does not depend on who else is present. No ring, no virtual nodes, no state: the same
member set gives the same answer in every process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = ["owner", "score"]


def score(member: str, key: str) -> int:
    """The weight of ``member`` for ``key``: 64 bits of BLAKE2b over both (stable across processes,
    unlike :func:`hash`)."""
    digest = hashlib.blake2b(b"%s\0%s" % (member.encode(), key.encode()), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(key: str, members: Iterable[str]) -> str | None:
    """The member that owns ``key`` (None when there are no members). Ties, which need a 64-bit
    collision, go to the greater member name so that every process agrees."""
    best: str | None = None
    best_score = -1
    for member in members:
        s = score(member, key)
        if s > best_score or (s == best_score and best is not None and member > best):
            best, best_score = member, s
    return best
