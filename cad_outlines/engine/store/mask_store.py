"""The mask store: token sets keyed by (lexer configuration, terminal sequence).

For configuration q, a row ``(emitted, entered, set_id)`` says: the tokens of set
`set_id` lead from q to a state where the labels `emitted` are complete and the
current lexeme will end as one of `entered` (``()`` when the token ends exactly at a
lexeme boundary; -1 stands for an ignored terminal). A token is allowed iff some row
holding it passes the parser check. Identical token sets are stored once; each set is
kept as sorted ids or, when denser than half the vocabulary, as the ids it lacks.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .lexer import Config

__all__ = ["MaskStore", "Row", "SetInterner"]

Row = tuple[tuple[int, ...], tuple[int, ...], int]  # (emitted labels, entered labels, set id)


@dataclass
class MaskStore:
    vocab_size: int
    configs: list[Config]
    rows: list[list[Row]]  # per config id
    set_ids: list[np.ndarray] = field(default_factory=list)  # int32 sorted token ids
    set_negated: list[bool] = field(default_factory=list)  # True: the set is all tokens EXCEPT set_ids

    @property
    def n_rows(self) -> int:
        """Rows per configuration, summed: what masks read."""
        return sum(len(r) for r in self.rows)

    @property
    def n_stored_rows(self) -> int:
        """Rows held: configurations with equal row lists share one (in memory, in the
        cache file and in the flat arrays)."""
        return sum(map(len, self.row_lists()[0]))

    def row_lists(self) -> tuple[list[list[Row]], list[int]]:
        """The distinct row lists in order of first use, and each configuration's index
        into them: how the store is held."""
        index: dict[tuple, int] = {}
        lists: list[list[Row]] = []
        of: list[int] = []
        for rows in self.rows:
            k = index.setdefault(tuple(rows), len(lists))
            if k == len(lists):
                lists.append(rows)
            of.append(k)
        return lists, of

    def shared(self) -> MaskStore:
        """This store with equal row lists made one list object (memory)."""
        lists, of = self.row_lists()
        self.rows = [lists[k] for k in of]
        return self

    def set_mask(self, set_id: int) -> np.ndarray:
        mask = np.zeros(self.vocab_size, dtype=bool)
        mask[self.set_ids[set_id]] = True
        return ~mask if self.set_negated[set_id] else mask

    def or_into(self, mask: np.ndarray, set_id: int) -> None:
        ids = self.set_ids[set_id]
        if self.set_negated[set_id]:
            keep = mask[ids].copy()
            mask[:] = True
            mask[ids] = keep
        else:
            mask[ids] = True

    def union_into(self, mask: np.ndarray, set_ids) -> None:
        """OR the given sets into `mask` (one fancy-index write for the positive sets)."""
        positive = [self.set_ids[k] for k in set_ids if not self.set_negated[k]]
        negative = [self.set_ids[k] for k in set_ids if self.set_negated[k]]
        if positive:
            mask[np.concatenate(positive)] = True
        if negative:
            lacking = negative[0]
            for ids in negative[1:]:
                lacking = np.intersect1d(lacking, ids, assume_unique=True)
            keep = mask[lacking].copy()
            mask[:] = True
            mask[lacking] = keep

    # -- persistence ------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """One .npz; equal row lists are written once (``cfg_list``: each config's list)."""
        flat_rows, row_ptr, labels_pool = [], [0], []
        lists, cfg_list = self.row_lists()
        for rows in lists:
            for emitted, entered, sid in rows:
                flat_rows.append((len(labels_pool), len(emitted), len(entered), sid))
                labels_pool.extend(emitted)
                labels_pool.extend(entered)
            row_ptr.append(len(flat_rows))
        cfg_flat, cfg_ptr = [], [0]
        for c in self.configs:
            cfg_flat.extend([c.owner, c.state, len(c.cons)] + [x for pair in c.cons for x in pair])
            cfg_ptr.append(len(cfg_flat))
        set_ptr = np.cumsum([0] + [len(s) for s in self.set_ids])
        np.savez_compressed(
            path,
            vocab_size=np.int64(self.vocab_size),
            rows=np.array(flat_rows, dtype=np.int32).reshape(-1, 4),
            row_ptr=np.array(row_ptr, dtype=np.int64),
            cfg_list=np.array(cfg_list, dtype=np.int32),
            labels_pool=np.array(labels_pool, dtype=np.int32),
            cfg_flat=np.array(cfg_flat, dtype=np.int32),
            cfg_ptr=np.array(cfg_ptr, dtype=np.int64),
            set_data=np.concatenate(self.set_ids) if self.set_ids else np.zeros(0, np.int32),
            set_ptr=set_ptr.astype(np.int64),
            set_negated=np.array(self.set_negated, dtype=bool),
        )

    @classmethod
    def load(cls, path: str | Path) -> MaskStore:
        z = np.load(path)
        pool = z["labels_pool"].tolist()
        rows_arr, row_ptr = z["rows"].tolist(), z["row_ptr"].tolist()
        lists = [[(tuple(pool[o : o + ne]), tuple(pool[o + ne : o + ne + nn]), sid)
                  for o, ne, nn, sid in rows_arr[row_ptr[k] : row_ptr[k + 1]]] for k in range(len(row_ptr) - 1)]
        old = "cfg_list" not in z.files  # written before row lists were shared: one list per config
        rows = lists if old else [lists[k] for k in z["cfg_list"].tolist()]
        flat, ptr = z["cfg_flat"].tolist(), z["cfg_ptr"].tolist()
        configs = []
        for q in range(len(ptr) - 1):
            owner, state, nc, *rest = flat[ptr[q] : ptr[q + 1]]
            configs.append(Config(owner, state, tuple((rest[2 * k], rest[2 * k + 1]) for k in range(nc))))
        data, sptr = z["set_data"], z["set_ptr"]
        sets = [data[sptr[k] : sptr[k + 1]] for k in range(len(sptr) - 1)]
        store = cls(int(z["vocab_size"]), configs, rows, sets, z["set_negated"].tolist())
        return store.shared() if old else store

    def digest(self) -> str:
        """A content hash of the store (for checking that two builds agree)."""
        h = hashlib.sha256()
        h.update(repr((self.vocab_size, self.configs, self.rows, self.set_negated)).encode())
        for s in self.set_ids:
            h.update(s.tobytes())
        return h.hexdigest()


class SetInterner:
    """Token sets stored once each: sorted ids, or the ids lacking when the set holds more
    than half the vocabulary."""

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size
        self.set_ids: list[np.ndarray] = []
        self.negated: list[bool] = []
        self._index: dict[bytes, list[int]] = {}  # content digest -> set ids (compared on a hit)

    def add(self, ids: np.ndarray, negated: bool) -> int:
        """The id of a set given in stored form (sorted int32 ids, negated flag)."""
        h = hashlib.blake2b(bytes([negated]), digest_size=16)
        h.update(np.ascontiguousarray(ids, dtype=np.int32))
        same = self._index.setdefault(h.digest(), [])
        for sid in same:
            if self.negated[sid] == negated and np.array_equal(self.set_ids[sid], ids):
                return sid
        sid = len(self.set_ids)
        same.append(sid)
        self.set_ids.append(ids)
        self.negated.append(negated)
        return sid

    def add_mask(self, mask: np.ndarray) -> int:
        """The id of the set of True positions of a bool mask over the vocabulary."""
        neg = int(mask.sum()) * 2 > self.vocab_size
        return self.add(np.flatnonzero(~mask if neg else mask).astype(np.int32), neg)
