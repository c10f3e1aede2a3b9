"""α–β of a link from measured all-reduce latencies: the start-up latency and bandwidth the book's model needs.

Method. For one system and GPU count p, the measured all-reduce times T(M) over message sizes M are fitted
with T = a + M / b by weighted least squares, each point weighted by 1 / T (so that a 16-byte and a 1-GB
message count alike: the fit minimises the relative error). `a` is the start-up cost of the whole
collective and `b` its algorithm bandwidth (message bytes per second). The book's ring all-reduce is
2(p−1) dependent rounds moving 2(p−1)/p · M bytes per rank, so the same line reads, per round and per
link direction, as

    α = a / (2(p−1)),    B = b · 2(p−1) / p,

which reproduces T exactly: 2(p−1)·α + 2(p−1)/p · M / B = a + M / b. The fit's residuals (root-mean-square
and worst relative error over the points) say how well one straight line describes the measurement; the
protocol switches of NCCL (LL, LL128, Simple) make it imperfect, and the residual says by how much.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: bytes per element of the dtype names the measured tables use (message sizes are element counts)
DTYPE_BYTES = {"half": 2, "float16": 2, "bfloat16": 2, "bf16": 2, "fp16": 2, "int8": 1, "fp8": 1, "float": 4, "float32": 4}


@dataclass(frozen=True)
class AllReduceFit:
    """The fitted line of one system's all-reduce at one GPU count, and what it was fitted to."""

    gpus: int
    start_up_s: float                  # a: the whole collective's start-up
    algorithm_bytes_per_s: float       # b: message bytes per second
    alpha_s: float                     # per ring round
    link_bytes_per_s: float            # one-way bytes per second per rank
    rms_relative_residual: float
    max_relative_residual: float
    points: int
    message_bytes_min: float
    message_bytes_max: float
    source: dict = field(default_factory=dict)   # system, table, framework, version, file, sha256, dtype

    def time_s(self, message_bytes):
        """The fitted all-reduce time of `message_bytes` (array-friendly)."""
        return self.start_up_s + np.asarray(message_bytes, dtype=float) / self.algorithm_bytes_per_s

    def as_dict(self) -> dict:
        return {"gpus": self.gpus, "start_up_s": self.start_up_s, "algorithm_bytes_per_s": self.algorithm_bytes_per_s,
                "alpha_s": self.alpha_s, "link_bytes_per_s": self.link_bytes_per_s,
                "rms_relative_residual": self.rms_relative_residual, "max_relative_residual": self.max_relative_residual,
                "points": self.points, "message_bytes_min": self.message_bytes_min,
                "message_bytes_max": self.message_bytes_max, "source": dict(self.source)}


def fit_line(message_bytes: np.ndarray, latency_s: np.ndarray) -> tuple[float, float]:
    """(a, 1/b) of T = a + M·(1/b), least squares on relative error; both kept ≥ 0."""
    m = np.asarray(message_bytes, dtype=float)
    t = np.asarray(latency_s, dtype=float)
    w = 1.0 / t
    design = np.column_stack([w, m * w])
    (a, inv_b), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if a < 0:   # the line through the origin is the best non-negative start-up
        a, inv_b = 0.0, float(np.sum(m * w * w) and np.sum(m * w) / np.sum((m * w) ** 2))
    if inv_b <= 0:   # a pure start-up: the bandwidth term cannot be seen in the data
        inv_b = 1e-30
        a = float(np.sum(w) / np.sum(w * w))
    return float(a), float(inv_b)


def fit_all_reduce(columns: dict, source: dict | None = None, *, op_name: str = "all_reduce",
                   dtype_column: str | None = None, dtype: str | None = None, backend: str | None = None) -> list[AllReduceFit]:
    """One fit per GPU count of a measured collective table (columns as NumPy arrays, latency in ms,
    message_size in elements of the row's dtype)."""
    ops = np.asarray(columns["op_name"]).astype(str)
    keep = ops == op_name
    dcol = dtype_column or next((c for c in ("nccl_dtype", "allreduce_dtype", "dtype") if c in columns), None)
    dtypes = np.asarray(columns[dcol]).astype(str) if dcol else np.full(ops.shape, "half")
    if dtype is None:   # the 16-bit rows: what a BF16/FP16 activation all-reduce moves
        dtype = next((d for d in ("half", "bfloat16", "float16") if np.any(keep & (dtypes == d))), None)
    if dtype is not None:
        keep &= dtypes == dtype
    if backend is not None and "backend" in columns:
        keep &= np.asarray(columns["backend"]).astype(str) == backend
    gpus = np.asarray(columns["num_gpus"], dtype=np.int64)
    elem_bytes = np.array([DTYPE_BYTES.get(d.lower(), 2) for d in dtypes], dtype=float)
    m_bytes = np.asarray(columns["message_size"], dtype=float) * elem_bytes
    lat_s = np.asarray(columns["latency"], dtype=float) / 1e3
    fits = []
    for p in sorted(set(gpus[keep].tolist())):
        sel = keep & (gpus == p) & (lat_s > 0)
        if sel.sum() < 3 or p < 2:
            continue
        a, inv_b = fit_line(m_bytes[sel], lat_s[sel])
        pred = a + m_bytes[sel] * inv_b
        rel = pred / lat_s[sel] - 1.0
        b = 1.0 / inv_b
        rounds = 2.0 * (p - 1)
        fits.append(AllReduceFit(
            gpus=int(p), start_up_s=a, algorithm_bytes_per_s=b, alpha_s=a / rounds, link_bytes_per_s=b * rounds / p,
            rms_relative_residual=float(np.sqrt(np.mean(rel ** 2))), max_relative_residual=float(np.max(np.abs(rel))),
            points=int(sel.sum()), message_bytes_min=float(m_bytes[sel].min()), message_bytes_max=float(m_bytes[sel].max()),
            source={**(source or {}), "op_name": op_name, "dtype": dtype, **({"backend": backend} if backend else {})}))
    return fits


def fit_for(fits: list[AllReduceFit], gpus: int) -> tuple[AllReduceFit, bool]:
    """The fit measured at `gpus`, else the nearest GPU count (second value False: not measured at that count)."""
    exact = [f for f in fits if f.gpus == gpus]
    if exact:
        return exact[0], True
    return min(fits, key=lambda f: (abs(np.log2(f.gpus) - np.log2(max(gpus, 1))), f.gpus)), False
