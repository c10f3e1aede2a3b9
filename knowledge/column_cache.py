"""The measured tables' columns as arrays that serving workers share: read from DuckDB once, kept as `.npy` files
and memory-mapped.

A measured file's columns reach the calculators as a `Columns` mapping (name -> NumPy array, in file order).
Numbers are arrays of their own dtype. Text is dictionary-encoded: per column the sorted distinct values (the
vocabulary) and one small integer code per row, computed by DuckDB (`list_position`), so that reading a table of
600,000 rows never makes 600,000 Python strings (that cost ~60 B a row and ~200 MB a worker). `columns[name]` of
a text column is an object array of the vocabulary's own strings (made on first access, 8 B a row);
`columns.coded(name)` gives (codes, vocabulary) to code that only groups rows by value (`index_table`).

`ColumnCache(directory)` keeps every file's columns as `.npy` files under `<directory>/<sha256 of the file>-v1/`,
written once (into a temporary directory renamed into place, so a reader sees a whole set or none) and opened with
`np.load(mmap_mode="r")`: the pages are the kernel's page cache, shared by every process that maps them, and a
second worker (or a second load) maps the same files instead of reading and copying the rows again. `casebook serve`
opens its private copy of the store in its runtime directory, so the cache lives beside that copy and goes with
it. When the directory cannot be written (read-only, full), the columns are kept in memory and that is said once.
"""
from __future__ import annotations

import json
import logging
import mmap
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

log = logging.getLogger("casebook.columns")

#: the layout of one cached file (bumped when it changes: an old cache is then simply not found)
FORMAT = "v1"
_TEXT_TYPES = ("VARCHAR",)


def column_cache_dir(db: Path) -> Path:
    """Where the column cache of the store `db` lives: `<db>.columns/` beside it."""
    db = Path(db)
    return db.with_name(db.name + ".columns")


def prune_column_cache(db: Path, keep: set[str]) -> list[Path]:
    """Remove the cached files of `db`'s column cache whose sha256 is not in `keep` (the files a new build of `db`
    holds); a process that still maps one keeps its pages (an unlinked file lives while mapped). Returns what went."""
    gone = []
    try:
        entries = sorted(column_cache_dir(db).iterdir())
    except OSError:
        return gone
    for d in entries:
        sha, _, fmt = d.name.rpartition("-")
        if d.is_dir() and not d.name.startswith(".") and not (sha in keep and fmt == FORMAT):
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
    return gone


def same_file(path: Path, fd: int | None) -> bool:
    """Whether `path` still names the file open as `fd` (False when it cannot be told)."""
    if fd is None:
        return False
    try:
        a, b = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _code_dtype(n: int) -> np.dtype:
    return np.dtype(np.uint8 if n <= 0xFF else np.uint16 if n <= 0xFFFF else np.int32)


class Columns(Mapping):
    """A measured file's columns by name, in file order: arrays (read-only), text columns dictionary-encoded."""

    def __init__(self, order: Sequence[str], arrays: dict[str, np.ndarray],
                 coded: dict[str, tuple[np.ndarray, np.ndarray]], mapped: bool = False):
        self._order = list(order)
        self._arrays = dict(arrays)
        self._coded = dict(coded)
        self.mapped = mapped            # the arrays are memory-mapped `.npy` files of a ColumnCache
        for a in (*self._arrays.values(), *(c for c, _ in self._coded.values())):
            if a.flags.writeable:
                a.flags.writeable = False

    def __getitem__(self, name: str) -> np.ndarray:
        arr = self._arrays.get(name)
        if arr is None:
            if name not in self._coded:
                raise KeyError(name)
            codes, vocab = self._coded[name]
            arr = vocab.astype(object)[codes]      # the vocabulary's strings, one reference per row
            arr.flags.writeable = False
            self._arrays[name] = arr
        return arr

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, name: object) -> bool:
        return name in self._arrays or name in self._coded

    def coded(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(codes, vocabulary) of a text column: `vocabulary[codes]` are its values, the vocabulary sorted
        ascending (as `np.unique` sorts), so code order is value order; None for any other column."""
        return self._coded.get(name)

    def release(self) -> None:
        """Unmap from this process the pages of the memory-mapped arrays read so far (MADV_DONTNEED): they stay in
        the page cache, and a later read maps them again. Called once the rows are in an index, so that a warm
        worker's resident memory holds the indexes, not the tables they were built from."""
        if not self.mapped:
            return
        for arr in self.arrays():
            mm = getattr(arr, "_mmap", None)
            if mm is not None and hasattr(mm, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
                try:
                    mm.madvise(mmap.MADV_DONTNEED)
                except (OSError, ValueError):
                    pass

    def arrays(self) -> Iterator[np.ndarray]:
        """Every array held (numbers, codes), without materialising text columns."""
        yield from (a for n, a in self._arrays.items() if n not in self._coded)
        yield from (c for c, _ in self._coded.values())


def read_columns(con: duckdb.DuckDBPyConnection, source: str, params: Sequence[Any] = (),
                 columns: Sequence[str] | None = None, order_by: str = "") -> Columns:
    """`SELECT <columns> FROM <source> [ORDER BY ...]` (`source` may carry a WHERE with `params`) as `Columns`:
    numbers as they come, every text column without NULLs as codes into its sorted distinct values (a text
    column with NULLs stays an object array)."""
    select = ", ".join(_quote(c) for c in columns) if columns else "*"
    tail = f" ORDER BY {order_by}" if order_by else ""
    described = con.execute(f"DESCRIBE SELECT {select} FROM {source}", list(params)).fetchall()
    names = [r[0] for r in described]
    text = [r[0] for r in described if str(r[1]).upper() in _TEXT_TYPES]
    vocab: dict[str, list[str]] = {}
    if text:
        aggs = ", ".join(f"list(DISTINCT {_quote(c)}) FILTER (WHERE {_quote(c)} IS NOT NULL), "
                         f"count(*) - count({_quote(c)})" for c in text)
        row = con.execute(f"SELECT {aggs} FROM {source}", list(params)).fetchone()
        for i, c in enumerate(text):
            if not row[2 * i + 1]:                          # no NULL: dictionary-encoded
                vocab[c] = sorted(row[2 * i] or [])
    exprs = []
    for c in names:
        if c in vocab:
            exprs.append(f"list_position(?::VARCHAR[], {_quote(c)}) - 1 AS {_quote(c)}")
        else:
            exprs.append(_quote(c))
    # the vocabularies' parameters come before the source's in the SQL text
    args = [vocab[c] for c in names if c in vocab] + list(params)
    got = con.execute(f"SELECT {', '.join(exprs)} FROM {source}{tail}", args).fetchnumpy()
    arrays, coded = {}, {}
    for c in names:
        arr = got[c]
        if c in vocab:
            v = np.array(vocab[c], dtype=str) if vocab[c] else np.array([], dtype="<U1")
            coded[c] = (np.asarray(arr).astype(_code_dtype(len(v))), v)
        else:
            arrays[c] = arr
    return Columns(names, arrays, coded)


def read_store_columns(db: Path, table: str, f: dict[str, Any]) -> Columns:
    """The rows of measured file `f` (manifest entry: `path`, `columns`) in `table` of the store `db`, in file
    order, as `Columns`, read by an in-memory DuckDB that attaches `db` read-only and is closed after: the
    blocks it read go with it (the store's own connection would keep them in its buffer pool, ~30 MB a worker)."""
    con = duckdb.connect(config={"threads": 1})
    try:
        con.execute(f"ATTACH '{str(db).replace(chr(39), chr(39) * 2)}' AS store (READ_ONLY)")
        return read_columns(con, f"store.{_quote(table)} WHERE file = ?", [f["path"]], f["columns"], "rowid")
    finally:
        con.close()


class ColumnCache:
    """Measured files' columns as memory-mapped `.npy` files under `directory`, one subdirectory per file named by
    its sha256 (so a cache is never stale: other bytes are another name). `get(f, read)` maps the file's
    columns, writing them first with `read(f)` when they are not there yet."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.unwritable: str | None = None      # why writing failed (then columns stay in memory)
        self._lock = threading.Lock()

    def path(self, f: dict[str, Any]) -> Path:
        return self.directory / f"{f['sha256']}-{FORMAT}"

    def get(self, f: dict[str, Any], read: Callable[[dict[str, Any]], Columns]) -> Columns:
        where = self.path(f)
        found = self._open(where)
        if found is not None:
            return found
        cols = read(f)
        if self.unwritable is None and isinstance(cols, Columns):
            try:
                self._write(where, cols)
            except OSError as exc:
                with self._lock:
                    if self.unwritable is None:
                        self.unwritable = str(exc)
                        log.warning("measured tables stay in each worker's memory: cannot write %s: %s",
                                    self.directory, exc)
                return cols
            found = self._open(where)
        return found if found is not None else cols

    @staticmethod
    def _open(where: Path) -> Columns | None:
        """The columns cached in `where`, memory-mapped; None when there is no (whole, readable) set."""
        try:
            meta = json.loads((where / "columns.json").read_text(encoding="utf-8"))
            arrays, coded = {}, {}
            for i, c in enumerate(meta["columns"]):
                if c["coded"]:
                    coded[c["name"]] = (np.load(where / f"{i}.npy", mmap_mode="r"),
                                        np.load(where / f"{i}.vocab.npy", allow_pickle=False))
                else:
                    arrays[c["name"]] = np.load(where / f"{i}.npy", mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return Columns([c["name"] for c in meta["columns"]], arrays, coded, mapped=True)

    def _write(self, where: Path, cols: Columns) -> None:
        """Write `cols` to `where` (through a temporary directory renamed into place; a concurrent writer of the
        same file may win: its set is the same)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".incoming-", dir=self.directory))
        try:
            meta = []
            for i, name in enumerate(cols):
                pair = cols.coded(name)
                if pair is not None:
                    np.save(tmp / f"{i}.npy", pair[0])
                    np.save(tmp / f"{i}.vocab.npy", pair[1])
                else:
                    arr = cols[name]
                    if arr.dtype.hasobject or isinstance(arr, np.ma.MaskedArray):
                        raise _NotCacheable(name)
                    np.save(tmp / f"{i}.npy", arr)
                meta.append({"name": name, "coded": pair is not None})
            (tmp / "columns.json").write_text(json.dumps({"format": FORMAT, "columns": meta}), encoding="utf-8")
            try:
                os.rename(tmp, where)
            except OSError:
                if not where.is_dir():          # not another worker's whole set: a real failure
                    raise
        except _NotCacheable:
            pass                                # kept in memory (text with NULLs, masked numbers)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class _NotCacheable(Exception):
    """A column that `.npy` cannot hold without pickling (object or masked arrays)."""
