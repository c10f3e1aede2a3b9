"""`energy`: energy = power × time for devices of a hardware id or a given power, joules per token at a throughput,
and the CMOS dynamic-power ratio (α·C·V²·f) between two design points with its power density.
"""
from __future__ import annotations


import numpy as np
from pydantic import Field, model_validator

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_s, Fraction, Lookup, NonNegFloatSweep,
    num, out, Outputs, OutSweep, PosFloat, PosFloatSweep, PosInt, Profile, request_inputs, Result,
)
from calculators.framework import headline as hf
from calculators.domain import hardware_spec, note_scope


class DynamicPower(CalcRequest):
    """P_dyn ≈ α·C·V²·f: ratios of a new design point to an old one (or a given power ratio)."""

    voltage_old_v: PosFloat | None = Field(None, description="Supply voltage before, volts.", examples=[0.85])
    voltage_new_v: PosFloat | None = Field(None, description="Supply voltage after, volts.", examples=[0.55])
    frequency_ratio: PosFloat = Field(1.0, description="f_new / f_old.")
    capacitance_ratio: PosFloat = Field(1.0, description="C_new / C_old (switched capacitance).")
    activity_ratio: PosFloat = Field(1.0, description="α_new / α_old (switching activity).")
    power_ratio: PosFloat | None = Field(None, description="P_new / P_old when known directly (instead of voltages).")
    area_ratio: PosFloat | None = Field(None, description="A_new / A_old, for the power-density ratio.")

    @model_validator(mode="after")
    def _check(self):
        volts = self.voltage_old_v is not None and self.voltage_new_v is not None
        if volts == (self.power_ratio is not None):
            raise ValueError("give both voltages or power_ratio (one of the two)")
        return self


class EnergyRequest(CalcRequest):
    power_w: PosFloatSweep | None = Field(None, description="Power draw of one device in watts. Sweepable.", examples=[700])
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id whose power_w is used.", examples=["h100-sxm"])
    devices: PosInt = Field(1, description="Devices drawing that power.")
    utilization_of_power: Fraction = Field(1.0, description="Fraction of the rated power actually drawn (> 0).")
    time_s: NonNegFloatSweep | None = Field(None, description="Duration in seconds. Sweepable.")
    tokens: NonNegFloatSweep | None = Field(None, description="Tokens produced in that time (or with tokens_per_s). Sweepable.")
    tokens_per_s: PosFloatSweep | None = Field(None, description="Throughput of all the devices together. Sweepable.")
    dynamic_power: DynamicPower | None = Field(None, description="CMOS dynamic-power scaling between two design points.")

    @model_validator(mode="after")
    def _check(self):
        if self.power_w is not None and self.hardware:
            raise ValueError("give power_w or hardware, not both")
        if self.power_w is None and not self.hardware and self.dynamic_power is None:
            raise ValueError("give power_w, hardware or dynamic_power")
        return self


#: a number, or one per point when an input is swept (null where not finite)


class EnergyOutputs(Outputs):
    """Outputs of energy; lists where an input is swept. The energy part needs a power (power_w or hardware), the
    ratios `dynamic_power`."""

    power_w: OutSweep = Field(None, description="Power of all devices, device power × devices × utilization, W.")
    time_s: OutSweep = Field(None, description="Duration: time_s, or tokens / tokens_per_s, s.")
    energy_j: OutSweep = Field(None, description="power × time, J.")
    energy_kwh: OutSweep = Field(None, description="The same energy, kWh (3.6e6 J each).")
    joules_per_token: OutSweep = Field(None, description="power / tokens_per_s, or energy / tokens, J/token "
                                        "(null for zero tokens).")
    tokens_per_kwh: OutSweep = Field(None, description="Tokens per kWh at tokens_per_s, tokens/kWh.")
    power_ratio: float | None = Field(None, description="P_new / P_old, given or α·C·V²·f scaled (null on overflow).")
    power_reduction: float | None = Field(None, description="1 − power_ratio, a fraction (negative: more power).")
    power_density_ratio: float | None = Field(None, description="power_ratio / area_ratio (with area_ratio).")


def compute_energy(req: EnergyRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req, exclude_none=True), outputs={})
    o: dict = {}
    power = req.power_w
    if req.hardware:
        hw = hardware_spec(lookup, req.hardware, "hardware")
        note_scope(res, hw)
        power = hw.require("power_w", "hardware")
        hw.cite(res, "power_w")
        res.assume(f"{req.hardware} draws its rated power ({num(power)} W per device, typically the TDP) times utilization_of_power.")
    if power is not None:
        if req.utilization_of_power <= 0:
            raise CalcInputError("utilization_of_power", "must be > 0")
        x = broadcast({"power_w": power, "time_s": req.time_s if req.time_s is not None else 0.0,
                       "tokens": req.tokens if req.tokens is not None else 0.0,
                       "tokens_per_s": req.tokens_per_s if req.tokens_per_s is not None else 1.0})
        p = res.step("power", "P = P_device × devices × utilization", f"{num(first(x['power_w']))} W × {req.devices} × {num(req.utilization_of_power)}",
                     x["power_w"] * req.devices * req.utilization_of_power, "W")
        o["power_w"] = out(p)
        t = None
        if req.time_s is not None:
            t = x["time_s"]
        elif req.tokens is not None and req.tokens_per_s is not None:
            t = res.step("time", "t = tokens / (tokens/s)", f"{num(first(x['tokens']))} / {num(first(x['tokens_per_s']))}",
                         x["tokens"] / x["tokens_per_s"], "s")
        if t is not None:
            e = res.step("energy", "E = P × t", f"{num(first(p))} W × {fmt_s(first(t))}", p * t, "J")
            o.update(time_s=out(t), energy_j=out(e), energy_kwh=out(e / 3.6e6))
            if req.tokens is not None:
                with np.errstate(divide="ignore", invalid="ignore"):
                    jpt = np.where(x["tokens"] > 0, e / np.where(x["tokens"] > 0, x["tokens"], 1.0), np.inf)
                o["joules_per_token"] = out(jpt)
        if req.tokens_per_s is not None:
            jpt = res.step("energy per token", "J/token = P / (tokens/s)", f"{num(first(p))} W / {num(first(x['tokens_per_s']))} tok/s",
                           p / x["tokens_per_s"], "J/token")
            o["joules_per_token"] = out(jpt)
            o["tokens_per_kwh"] = out(3.6e6 / jpt)
        res.assume("Energy counts only the devices' own draw: host, network, cooling (PUE) are not included.")
    dp = req.dynamic_power
    if dp is not None:
        if dp.power_ratio is not None:
            ratio = dp.power_ratio
            res.step("power ratio", "P_new / P_old (given)", num(ratio), ratio, "")
        else:
            vr = dp.voltage_new_v / dp.voltage_old_v
            ratio = dp.activity_ratio * dp.capacitance_ratio * (vr * vr) * dp.frequency_ratio  # float ** raises on overflow
            res.step("power ratio", "P_new/P_old = (α'/α)(C'/C)(V'/V)²(f'/f)",
                     f"{num(dp.activity_ratio)} × {num(dp.capacitance_ratio)} × ({num(dp.voltage_new_v)}/{num(dp.voltage_old_v)})² × {num(dp.frequency_ratio)}",
                     ratio, "")
            res.assume("Dynamic power only (P ≈ α·C·V²·f); leakage and the other terms are held out.")
        o.update(power_ratio=ratio, power_reduction=1.0 - ratio)
        if dp.area_ratio is not None:
            dens = res.step("power density ratio", "(P_new/P_old) / (A_new/A_old)", f"{num(ratio)} / {num(dp.area_ratio)}",
                            ratio / dp.area_ratio, "")
            o["power_density_ratio"] = dens
    res.outputs = o
    res.headline = _energy_headline(req, o)
    return res


def _energy_headline(req, o: dict) -> str:
    """Energy, energy per token, and the power what-if (a sweep: its first point)."""
    n = hf.n_points(*(o.get(k) for k in ("power_w", "time_s", "energy_j", "joules_per_token")))
    parts = []
    if o.get("power_w") is not None:
        who = f"{hf.fmt_count(req.devices)} × {req.hardware}" if getattr(req, "hardware", None) else "The devices"
        text = f"{who} draw {hf.fmt_num(o['power_w'])} W"
        if o.get("energy_j") is not None:
            text += (f" and use {hf.fmt_num(o.get('energy_kwh'))} kWh ({hf.fmt_big(o['energy_j'])} J) in "
                     f"{hf.fmt_seconds(o.get('time_s'))}")
        if o.get("joules_per_token") is not None:
            text += f", {hf.fmt_num(o['joules_per_token'])} J per token"
        if o.get("tokens_per_kwh") is not None:
            text += f" ({hf.fmt_big(o['tokens_per_kwh'])} tokens per kWh)"
        if n > 1:
            text += f" (first of {n:,} points)"
        parts.append(text)
    if o.get("power_ratio") is not None:
        parts.append(f"the power change scales dynamic power by {hf.fmt_num(o['power_ratio'])}× "
                     f"({hf.fmt_pct(o.get('power_reduction'))} reduction)")
    return hf.sentence("; ".join(parts) or "No energy or power figure was computed")


CALCULATORS = [


    Calculator(
        name="energy",
        profile=Profile(5.7e-07, 368, 62),
        family="energy",
        title="Energy, joules per token and dynamic-power scaling",
        summary="Energy = power × time for devices of a hardware id or a given power, joules per token at a throughput, "
                "and the CMOS dynamic-power ratio (α·C·V²·f) between two design points with its power density.",
        description="E = P·devices·utilization·t; J/token = P/(tokens/s). Dynamic power P ≈ α·C·V²·f, so a voltage "
                    "change alone scales power by (V'/V)²; density ratio = power ratio / area ratio. Device draw only.",
        request_model=EnergyRequest,
        compute=compute_energy,
        outputs_model=EnergyOutputs,
        example={"hardware": "h100-sxm", "devices": 8, "tokens_per_s": 20000, "time_s": 3600},
        cases=("logicfolding-energy",),
        sweepable=("power_w", "time_s", "tokens", "tokens_per_s"),
        chart=Chart(x="tokens_per_s", y=("joules_per_token",), x_label="tokens/s", y_label="J/token"),
    ),
]
