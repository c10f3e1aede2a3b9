"""Typed views of the store's hardware and link records, and the one rule for usable memory.

Calculators never read hardware or link records as raw dicts: they ask `hardware_spec` or
`link_spec`, which return per-device figures plus the device count (a rack record of 72 GPUs
becomes "72 devices of X each"), with the provenance of every figure and the note of how it was
scaled. `usable_memory_bytes` is the one place where "how much of the memory can an engine use"
is decided.
"""
from __future__ import annotations

import datetime as _dt
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calculators.framework import CalcInputError, Lookup, RecordMemo, Result, fetch, num

# --------------------------------------------------------------------------- the memory rule

#: Fraction of device memory an inference engine may take by default: vLLM's `gpu_memory_utilization`
#: default (https://docs.vllm.ai/en/stable/configuration/engine_args.html, "--gpu-memory-utilization",
#: default 0.9). Weights, activations and KV cache must fit inside it; the rest is left to the CUDA
#: context, NCCL buffers and other processes.
DEFAULT_MEMORY_UTILIZATION = 0.9
#: Bytes set aside on top of that by default (none: the 10 % left by the utilization is the reserve).
#: NVIDIA's AIConfigurator reserves 3.5 GiB (`misc.other_mem: 3758096384` in its system files) with no
#: utilization factor; pass `runtime_reserve_bytes` to model that instead.
DEFAULT_RUNTIME_RESERVE_BYTES = 0.0
MEMORY_RULE = ("usable memory per device = capacity × memory_utilization − runtime_reserve_bytes "
               f"(defaults {DEFAULT_MEMORY_UTILIZATION} as vLLM's gpu_memory_utilization, and "
               f"{num(DEFAULT_RUNTIME_RESERVE_BYTES)} B)")


def usable_memory_bytes(capacity_bytes: Any, memory_utilization: float | None = None,
                        runtime_reserve_bytes: float | None = None) -> Any:
    """Bytes an engine may fill on one device: capacity × utilization − reserve (array-friendly, never < 0)."""
    u = DEFAULT_MEMORY_UTILIZATION if memory_utilization is None else memory_utilization
    r = DEFAULT_RUNTIME_RESERVE_BYTES if runtime_reserve_bytes is None else runtime_reserve_bytes
    return np.maximum(np.asarray(capacity_bytes, dtype=float) * u - r, 0.0)


def explain_memory_rule(res: Result, capacity_bytes: float, memory_utilization: float | None,
                        runtime_reserve_bytes: float | None, label: str = "usable memory per device") -> Any:
    """Apply the memory rule and record it as a step and an assumption."""
    from calculators.framework import fmt_bytes

    u = DEFAULT_MEMORY_UTILIZATION if memory_utilization is None else memory_utilization
    r = DEFAULT_RUNTIME_RESERVE_BYTES if runtime_reserve_bytes is None else runtime_reserve_bytes
    usable = usable_memory_bytes(capacity_bytes, u, r)
    res.step(label, "capacity × memory_utilization − runtime_reserve", f"{fmt_bytes(capacity_bytes)} × {num(u)} − {fmt_bytes(r)}",
             usable, "B")
    if memory_utilization is None or runtime_reserve_bytes is None:
        res.assume("Memory rule: " + MEMORY_RULE + "; set memory_utilization / runtime_reserve_bytes to change it.")
    return usable


# --------------------------------------------------------------------------- hardware

SCOPES = ("device", "node", "rack", "pod")

#: What kind of machine a hardware record is, for browsing the catalogue: slug -> label. A record may state its
#: `kind`; otherwise `hardware_kind` derives it from scope, vendor, form factor and name.
HARDWARE_KINDS = {
    "data-centre-gpu": "data-centre GPU",
    "accelerator": "accelerator",
    "laptop-desktop": "laptop/desktop",
    "rack-system": "rack system",
}
#: vendors whose accelerators are GPUs: their parts are data-centre GPUs unless a rule of `hardware_kind` says otherwise
_GPU_VENDORS = ("nvidia", "amd", "intel")
#: a non-GPU accelerator named in a name or architecture (TPU, Trainium, Gaudi, an Ascend/Atlas NPU, ...)
_ACCELERATOR = re.compile(r"\b(tpu\w*|trainium\w*|inferentia\w*|gaudi|ascend|atlas|npu|wse|lpu|ipu|mtia)\b")
#: a personal machine (a Mac SoC, a desktop or workstation card, a GeForce) named in a form factor or name
_PERSONAL = re.compile(r"\b(laptop|desktop|workstation|mac|geforce)\b")


def hardware_architecture(lookup: Lookup, ident: str) -> str | None:
    """The architecture a hardware record names ("CDNA 3", "Hopper"), None when it names none or there is no such
    record."""
    try:
        arch = fetch(lookup, "hardware", ident, "hardware").get("architecture")
    except CalcInputError:
        return None
    return str(arch) if arch else None


def hardware_kind(record: Any) -> str:
    """The kind (a key of HARDWARE_KINDS) of a hardware record (a dict or a record object), by rule:
    an explicit `kind` wins; a record covering several devices (scope rack or pod, or devices_in_scope > 1) is a
    rack system; an Apple part, or one whose form factor or name says laptop, desktop, workstation, Mac or GeForce,
    is a laptop/desktop; a TPU, Trainium, Inferentia, Gaudi or Ascend/Atlas NPU, and any part of a vendor that makes
    no GPUs, is an accelerator; the rest (NVIDIA, AMD and Intel GPUs) are data-centre GPUs."""
    def get(name: str) -> Any:
        return record.get(name) if isinstance(record, dict) else getattr(record, name, None)

    explicit = get("kind")
    if explicit:
        if explicit not in HARDWARE_KINDS:
            raise ValueError(f"hardware kind {explicit!r} is not one of {', '.join(HARDWARE_KINDS)}")
        return str(explicit)
    if get("scope") in ("rack", "pod") or int(get("devices_in_scope") or 1) > 1:
        return "rack-system"
    vendor = str(get("vendor") or "").strip().lower()
    name = " ".join(str(get(k) or "") for k in ("name", "architecture")).lower()
    if vendor == "apple" or _PERSONAL.search(str(get("form_factor") or "").lower() + " " + name):
        return "laptop-desktop"
    if _ACCELERATOR.search(name) or vendor not in _GPU_VENDORS:
        return "accelerator"
    return "data-centre-gpu"


@dataclass(frozen=True)
class Peak:
    """One published peak rate of one device."""

    input_precision: str
    accumulator: str | None
    unit: str
    sparsity: str
    flop_per_s: float
    provenance: dict


@dataclass(frozen=True)
class HardwareSpec:
    """A hardware record read per device: `devices` devices, each with the figures below."""

    id: str
    name: str
    scope: str                                # device | node | rack | pod
    devices: int                              # accelerators the record holds
    memory_bytes: float | None                # per device
    memory_bandwidth_bytes_per_s: float | None  # per device
    power_w: float | None                     # per device (None when only a whole-system figure is published)
    peaks: tuple[Peak, ...] = ()
    provenance: dict[str, dict] = field(default_factory=dict)   # field -> {record, field, value, source, locator}
    scaling: tuple[str, ...] = ()             # how totals were turned into per-device figures
    links: tuple[str, ...] = ()
    unknown: tuple[tuple[str, str], ...] = ()  # (figure, why the record has no sourced value), from its `unknown`

    def why_unknown(self, *names: str) -> str:
        """' (memory_bandwidth_bytes_per_s unknown: <reason>; ...)' for the named figures the record marks unknown
        and lacks, '' when it gives no reason for any of them."""
        reasons = dict(self.unknown)
        said = [f"{n} unknown: {reasons[n]}" for n in names if n in reasons and getattr(self, n, None) is None]
        return f" ({'; '.join(said)})" if said else ""

    def require_memory_and_bandwidth(self, loc: str = "hardware") -> None:
        """Refuse (422 naming `loc`) a record without per-device memory or bandwidth, quoting the record's reason."""
        if self.memory_bytes is None or self.memory_bandwidth_bytes_per_s is None:
            raise CalcInputError(loc, f"{self.id} has no sourced per-device memory or bandwidth"
                                      + self.why_unknown("memory_bytes", "memory_bandwidth_bytes_per_s"))

    @property
    def scale_up_link(self) -> str | None:
        """The link between the devices of one tensor-parallel group when a request names none: the first link the
        record lists (records list their NVLink, ICI or NVLink-C2C first and PCIe or a scale-out network after);
        None when the record lists no link. The one default every calculator that needs a TP link uses."""
        return self.links[0] if self.links else None

    @property
    def is_device(self) -> bool:
        return self.scope == "device" and self.devices == 1

    def describe_scope(self) -> str:
        if self.is_device:
            return f"{self.id} is one device"
        return (f"{self.id} is a {self.scope} of {self.devices} devices: figures are per device "
                f"({'; '.join(self.scaling) or 'published per device'}), and the device count is {self.devices}")

    def require(self, name: str, loc: str) -> float:
        value = getattr(self, name)
        if value is None:
            raise CalcInputError(loc, f"{self.id} has no sourced per-device {name}" + self.why_unknown(name))
        return float(value)

    def cite(self, res: Result, *names: str) -> None:
        for n in names:
            res.cite(self.provenance.get(n))

    def peak(self, precision: str, sparsity: str = "dense", loc: str = "hardware") -> Peak:
        """The precision-matched peak row (tensor/matrix unit preferred, then FP32 accumulation)."""
        match = [p for p in self.peaks if p.input_precision.upper() == precision.upper() and p.sparsity == sparsity]
        if not match:
            have = sorted({f"{p.input_precision}/{p.sparsity}" for p in self.peaks})
            why = dict(self.unknown).get(f"peak_{precision.lower()}_{sparsity}")
            raise CalcInputError(loc, f"{self.id} has no {sparsity} {precision} peak; it has: {', '.join(have) or 'none'}"
                                      + (f" (peak_{precision.lower()}_{sparsity} unknown: {why})" if why else ""))
        return min(match, key=lambda p: (0 if p.unit.lower() in ("tensor", "cube", "matrix") else 1,
                                         0 if (p.accumulator or "").upper() == "FP32" else 1))


def figure_basis(per: str | None, scope: str) -> str:
    """`device`, `total` or `system`: what a figure of a hardware record covers (its `per`, else by the scope)."""
    if per in ("device", "total", "system"):
        return per
    return "device" if scope == "device" else "total"


def per_device_value(value: float, per: str | None, scope: str, devices: int) -> float | None:
    """The one rule for reading a hardware figure per device: a figure of one device (`per: device`, or any figure
    of a device-scope record) is kept; a total over the devices in scope (`per: total`, the default of node and
    rack records) is divided by their number; a whole-system figure (`per: system`) has no per-device value (None)
    when the scope holds several devices. The store's `memory_per_device_bytes` and every calculator use it."""
    basis = figure_basis(per, scope)
    if devices <= 1 or basis == "device":
        return value
    return None if basis == "system" else value / devices


def _prov(rec: dict, fact: dict, field_name: str, value: float) -> dict:
    return {"record": rec.get("id"), "field": field_name, "value": value, "source": fact.get("source"),
            "locator": fact.get("locator"), "source_url": fact.get("source_url")}


def hardware_spec(lookup: Lookup, ident: str, loc: str = "hardware") -> HardwareSpec:
    """The record `ident` as per-device figures plus its device count (a miss is a 422 naming `loc`)."""
    rec = fetch(lookup, "hardware", ident, loc)
    return spec_from_record(rec)


#: record -> its HardwareSpec: a record is read per device once, not per request
_SPECS = RecordMemo()


def spec_from_record(rec: dict) -> HardwareSpec:
    """The record read per device (`HardwareSpec` is immutable, so one instance serves every request)."""
    return _SPECS.get(rec, ("spec",), lambda: _spec_from_record(rec))


def _spec_from_record(rec: dict) -> HardwareSpec:
    scope = str(rec.get("scope") or "device")
    devices = int(rec.get("devices_in_scope") or 1)
    prov: dict[str, dict] = {}
    scaling: list[str] = []

    def per_device(name: str) -> float | None:
        fact = rec.get(name)
        if not isinstance(fact, dict) or fact.get("value") is None:
            return None
        total = float(fact["value"])
        value = per_device_value(total, fact.get("per"), scope, devices)
        if value is None:
            scaling.append(f"{name} {num(total)} is a whole-system figure, not divided per device")
            prov[name] = _prov(rec, fact, name, total)
            return None
        if value != total:
            scaling.append(f"{name} = published total {num(total)} ÷ {devices}")
        prov[name] = _prov(rec, fact, name, value)
        return value

    memory = per_device("memory_bytes")
    bandwidth = per_device("memory_bandwidth_bytes_per_s")
    power = per_device("power_w")
    peaks = []
    divided_peaks = False
    for row in rec.get("peaks") or []:
        fact = row.get("flop_per_s") if isinstance(row, dict) else None
        if not isinstance(fact, dict) or fact.get("value") is None:
            continue
        total = float(fact["value"])
        value = per_device_value(total, fact.get("per"), scope, devices)
        if value is None:
            continue
        divided_peaks = divided_peaks or value != total
        fname = (f"peaks[{row.get('input_precision')}, acc {row.get('accumulator')}, {row.get('unit')}, "
                 f"{row.get('sparsity')}].flop_per_s")
        peaks.append(Peak(str(row.get("input_precision")), row.get("accumulator"), str(row.get("unit") or ""),
                          str(row.get("sparsity") or "unspecified"), value, _prov(rec, fact, fname, value)))
    if divided_peaks:
        scaling.append(f"peak rates = published totals ÷ {devices}")
    unknown = rec.get("unknown") if isinstance(rec.get("unknown"), dict) else {}
    return HardwareSpec(rec["id"], rec.get("name") or rec["id"], scope, devices, memory, bandwidth, power, tuple(peaks),
                        prov, tuple(scaling), tuple(rec.get("links") or ()),
                        tuple((str(k), str(v)) for k, v in unknown.items()))


def note_scope(res: Result, hw: HardwareSpec) -> None:
    """Say, in the assumptions, when a record is more than one device and how its figures were scaled."""
    if not hw.is_device:
        res.assume(hw.describe_scope() + ".")


# --------------------------------------------------------------------------- links

@dataclass(frozen=True)
class LinkSpec:
    """A link read as start-up latency α and one-way bandwidth B, each with its provenance."""

    id: str
    name: str
    one_way_bytes_per_s: float | None
    latency_s: float | None
    latency_basis: str                      # sourced | missing
    provenance: dict[str, dict] = field(default_factory=dict)


def link_spec(lookup: Lookup, ident: str, loc: str = "link") -> LinkSpec:
    rec = fetch(lookup, "link", ident, loc)
    prov: dict[str, dict] = {}
    values: dict[str, float | None] = {}
    for name in ("one_way_bytes_per_s", "latency_s"):
        fact = rec.get(name)
        if isinstance(fact, dict) and fact.get("value") is not None:
            values[name] = float(fact["value"])
            prov[name] = _prov(rec, fact, name, values[name])
        else:
            values[name] = None
    return LinkSpec(rec["id"], rec.get("name") or rec["id"], values["one_way_bytes_per_s"], values["latency_s"],
                    "sourced" if values["latency_s"] is not None else "missing", prov)


def alpha_assumption(link: LinkSpec, field_name: str) -> str:
    """The loud sentence for a link without a sourced latency: α = 0 is a lower bound, never silent."""
    return (f"α NOT SOURCED: link {link.id} has no sourced start-up latency, so α = 0 s is used — communication time "
            f"is a lower bound (bandwidth only). Give `{field_name}` to include start-up latency.")


# --------------------------------------------------------------------------- the default price rule

#: Environment variable that fixes the reference date of the price rule (ISO date); unset: today.
PRICE_AS_OF_ENV = "CASEBOOK_PRICE_AS_OF"
#: An offer dated more than this many months before the reference date is stale: never a default.
PRICE_STALE_MONTHS = 12
PRICE_RULE = (f"the default price of a device: per provider its newest stored on-demand GPU-hour offer; an offer "
              f"dated more than {PRICE_STALE_MONTHS} months before the reference date is stale and dropped; among "
              "the providers' current offers, the lowest")


def price_date(text: Any) -> _dt.date | None:
    """A price's ISO date ('2026-09-20', '2026-09' or '2026') as a day; a month or a year is read as its first day
    (the oldest it can be, so an undated-by-day price is never taken as newer than it may be). None if not ISO."""
    s = str(text or "").strip()
    parts = s.split("-")
    if not (1 <= len(parts) <= 3 and len(parts[0]) == 4 and all(p.isdigit() for p in parts)
            and all(len(p) == 2 for p in parts[1:])):
        return None
    try:
        return _dt.date(int(parts[0]), int(parts[1]) if len(parts) > 1 else 1, int(parts[2]) if len(parts) > 2 else 1)
    except ValueError:
        return None


def price_as_of(as_of: _dt.date | str | None = None) -> _dt.date:
    """The reference date of the price rule: `as_of` when given, else CASEBOOK_PRICE_AS_OF, else today."""
    if isinstance(as_of, _dt.date):
        return as_of
    raw = as_of if as_of is not None else os.environ.get(PRICE_AS_OF_ENV, "").strip()
    if not raw:
        return _dt.date.today()
    day = price_date(raw) if len(str(raw)) == 10 else None
    if day is None:
        raise ValueError(f"{PRICE_AS_OF_ENV}={raw!r} is not an ISO date (YYYY-MM-DD)")
    return day


def months_old(day: _dt.date, as_of: _dt.date) -> int:
    """Whole calendar months from `day` to `as_of` (negative when `day` is later)."""
    months = (as_of.year - day.year) * 12 + as_of.month - day.month
    if months > 0 and as_of.day < day.day:
        months -= 1
    elif months < 0 and as_of.day > day.day:
        months += 1
    return months


def stale_cutoff(as_of: _dt.date) -> _dt.date:
    """The oldest date still current: the same day PRICE_STALE_MONTHS months before `as_of` (clamped to month end)."""
    y, m = divmod(as_of.year * 12 + as_of.month - 1 - PRICE_STALE_MONTHS, 12)
    m += 1
    last = (_dt.date(y + (m == 12), m % 12 + 1, 1) - _dt.timedelta(days=1)).day
    return _dt.date(y, m, min(as_of.day, last))


@dataclass
class PriceChoice:
    """What the price rule decided for one device: the default offer (or None and why), the providers' newest
    current offers it chose among, and the stale ones it dropped."""

    as_of: _dt.date
    best: dict | None
    current: list[dict]
    stale: list[dict]
    why: str = ""

    def basis(self) -> str:
        """Provider, region, date, age and the other current offers, in one line."""
        b = self.best
        if b is None:
            return self.why
        others = [o for o in self.current if o is not b]
        vals = sorted(o["device_usd_per_hour"]["value"] for o in others)
        n = len(others)
        rest = (f"{n} other current offer{'s' if n != 1 else ''} (one per provider), ${vals[0]:,.2f}"
                + (f"–${vals[-1]:,.2f}" if n > 1 else "") if others else "no other current offer")
        dropped = f"; {len(self.stale)} stale provider offer{'s' if len(self.stale) != 1 else ''} dropped" if self.stale else ""
        region = b.get("region") or "not stated by the source"
        return (f"{b.get('provider')} on-demand, region {region}, dated {b.get('date')} "
                f"({months_old(price_date(b.get('date')), self.as_of)} months before {self.as_of.isoformat()}); "
                f"the lowest newest-per-provider offer, {rest}{dropped}")


def _usd(o: dict) -> float:
    return float(o["device_usd_per_hour"]["value"])


def choose_device_price(offers: list[dict], as_of: _dt.date | str | None = None) -> PriceChoice:
    """The price rule (PRICE_RULE) over the GPU-hour offers of one device, at reference date `as_of`."""
    day = price_as_of(as_of)
    cutoff = stale_cutoff(day)
    dated = [(price_date(o.get("date")), o) for o in offers if o.get("pricing") in (None, "on-demand")]
    dated = [(d, o) for d, o in dated if d is not None and d <= day]
    newest: dict[str, tuple[_dt.date, dict]] = {}
    for d, o in sorted(dated, key=lambda t: (t[0], -_usd(t[1]), str(t[1].get("id")))):
        newest[str(o.get("provider"))] = (d, o)   # later dates (and, on one date, lower prices) win
    current = [o for d, o in newest.values() if d >= cutoff]
    stale = [o for d, o in newest.values() if d < cutoff]
    if current:
        best = min(current, key=lambda o: (_usd(o), str(o.get("id"))))
        return PriceChoice(day, best, current, stale)
    if stale:
        d, o = max(((price_date(o.get("date")), o) for o in stale), key=lambda t: (t[0], -_usd(t[1])))
        why = (f"the newest stored price, ${_usd(o):,.2f} from {o.get('provider')} dated {o.get('date')}, is older "
               f"than {PRICE_STALE_MONTHS} months ({months_old(d, day)} months before {day.isoformat()}): give "
               "price_per_device_hour_usd")
    elif any(o.get("pricing") in (None, "on-demand") for o in offers):
        why = (f"every stored on-demand price is undated or dated after the reference date {day.isoformat()}: give "
               "price_per_device_hour_usd")
    elif offers:
        kinds = sorted({str(o.get("pricing")) for o in offers})
        why = (f"no stored on-demand price (only {', '.join(kinds)} offers, never a default): give "
               "price_per_device_hour_usd")
    else:
        why = "no stored price: give price_per_device_hour_usd"
    return PriceChoice(day, None, [], stale, why)


def stored_device_price(lookup: Lookup, hardware_id: str, res: Result,
                        as_of: _dt.date | str | None = None) -> tuple[float | None, str]:
    """USD per device-hour from the store by the price rule (PRICE_RULE), cited, with a basis naming provider, region,
    date, age and the other current offers; (None, why) when no current on-demand offer is stored. The one default
    every calculator that prices hardware uses (the planner, serving-cost). `as_of`: the reference date (default
    CASEBOOK_PRICE_AS_OF, else today)."""
    try:
        offers = lookup("gpu_prices", hardware_id)
    except KeyError:
        offers = []
    choice = choose_device_price(list(offers), as_of)
    best = choice.best
    if best is None:
        return None, choice.why
    fact = best["device_usd_per_hour"]
    res.cite({"record": best.get("id"), "field": "device_usd_per_hour", "value": fact["value"], "source": fact.get("source"),
              "locator": fact.get("locator"), "source_url": fact.get("source_url")})
    return _usd(best), choice.basis()


# --------------------------------------------------------------------------- measured α–β of links

_FIT_CACHE: dict[str, list] = {}


def measured_link_fits(lookup: Lookup, link_id: str, hardware_id: str | None = None):
    """All-reduce fits (one per GPU count) of the measured system behind a link, or None when none is measured.

    A link maps to the systems measured over it (`lookup("measurement", "systems")`); when the request names
    hardware measured on that link, its system is used, else the link's first system."""
    from calculators.domain.link_fit import fit_all_reduce

    try:
        systems = lookup("measurement", "systems")
    except KeyError:
        return None
    candidates = list((systems.get("links") or {}).get(link_id) or [])
    if not candidates:
        return None
    own = (systems.get("hardware") or {}).get(hardware_id) if hardware_id else None
    system = own if own in candidates else candidates[0]
    try:
        table = lookup("measurement", f"{system}/nccl")
    except KeyError:
        return None
    key = table.get("sha256") or f"{system}/nccl"
    if key not in _FIT_CACHE:
        src = {k: table.get(k) for k in ("system", "table", "framework", "version", "gpu", "file", "sha256")}
        _FIT_CACHE[key] = fit_all_reduce(table["columns"], src)
    return _FIT_CACHE[key] or None


def describe_fit(fit, exact: bool) -> str:
    s = fit.source
    where = f"NCCL {s.get('version')} all-reduce on {s.get('system')} ({s.get('gpu')})"
    at = f"{fit.gpus} GPUs" if exact else f"{fit.gpus} GPUs, the nearest measured count"
    return (f"measured fit, {where}, {at}: T = {num(fit.start_up_s * 1e6, 4)} µs + M / {num(fit.algorithm_bytes_per_s / 1e9, 4)} "
            f"GB/s, i.e. α = {num(fit.alpha_s * 1e6, 4)} µs per ring round and B = {num(fit.link_bytes_per_s / 1e9, 4)} GB/s "
            f"one way; RMS relative residual {num(fit.rms_relative_residual * 100, 3)} % over {fit.points} points "
            "(NVIDIA AIConfigurator measurements, Apache-2.0)")


# --------------------------------------------------------------------------- device peaks

PRECISIONS = ("FP64", "FP32", "TF32", "BF16", "FP16", "FP8", "FP6", "FP4", "INT8", "INT4")


def hardware_rates(req, lookup: Lookup, res: Result, need_peak: bool = True, need_bw: bool = True,
                   optional_peak: bool = False):
    """(peak FLOP/s, bandwidth B/s, spec) per device for a request with `hardware` or explicit rates (either may be None).

    A node or rack record is read per device (its totals divided by its device count), and the answer says so.
    With `optional_peak`, a device without a sourced peak of that precision gives peak None (and an assumption).
    """
    peak = getattr(req, "peak_flop_per_s", None)
    bw = getattr(req, "memory_bandwidth_bytes_per_s", None)
    hw = None
    if getattr(req, "hardware", None):
        hw = hardware_spec(lookup, req.hardware, "hardware")
        note_scope(res, hw)
        if need_peak and peak is None:
            try:
                row = hw.peak(req.precision, req.sparsity)
            except CalcInputError as e:
                if not optional_peak:
                    raise
                res.assume(f"No compute time: {e.message}.")
            else:
                peak = row.flop_per_s
                res.cite(row.provenance)
                res.assume(f"Peak: {hw.id} {req.sparsity} {req.precision} row ({num(peak / 1e12)} TFLOP/s per device); "
                           "structured-sparse peaks are never used unless sparsity='structured' is asked for.")
        if need_bw and bw is None:
            bw = hw.require("memory_bandwidth_bytes_per_s", "hardware")
            hw.cite(res, "memory_bandwidth_bytes_per_s")
    return peak, bw, hw
