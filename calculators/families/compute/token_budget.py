"""Token and position counts: fixed-chunk padding, encoder positions of images and audio, packed-loss weights.

Three calculators:
- `chunk-padding`: a prompt of n tokens cut into fixed chunks of c positions: calls, padded positions,
  wasted positions and their share.
- `encoder-tokens`: how many positions a vision or audio encoder hands the language model (patches merged
  k×k; mel frames cut into chunks and halved by stride-2 stages).
- `packed-loss-mean`: the per-token loss (or gradient) mean of packed sequences, against the mean of
  per-sequence means that a grouping can silently introduce.
"""
from __future__ import annotations

import math
from typing import Annotated

import numpy as np
from pydantic import Field

from calculators.framework import (
    aligned, broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, Lookup, num, out, Outputs, PosInt,
    PosIntSweep, Profile, quiet, request_inputs, Result, whole_numbers,
)
from calculators.framework import headline as hf


# =========================================================================== chunk padding

class ChunkPaddingRequest(CalcRequest):
    tokens: PosIntSweep = Field(description="Prompt positions to process. Sweepable.", examples=[513])
    chunk_tokens: PosIntSweep = Field(description="Fixed positions per call (chunk or tile size). Sweepable.",
                                      examples=[[256, 128]])


@quiet
def chunk_compute(req: ChunkPaddingRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    x = aligned(broadcast({"n": req.tokens, "c": req.chunk_tokens}))
    n, c = x["n"], x["c"]
    calls = res.step("calls", "ceil(n / c)", f"ceil({num(first(n))} / {num(first(c))})", np.ceil(n / c), "calls")
    padded = res.step("positions computed", "calls × c", f"{num(first(calls))} × {num(first(c))}", calls * c, "positions")
    extra = res.step("padding", "calls × c − n", f"{num(first(padded))} − {num(first(n))}", padded - n, "positions")
    waste = res.step("share wasted", "padding / (calls × c)", f"{num(first(extra))} / {num(first(padded))}",
                     extra / padded, "fraction")
    res.outputs = {"calls": whole_numbers(calls), "padded_tokens": whole_numbers(padded),
                   "padding_tokens": whole_numbers(extra), "waste_fraction": out(waste),
                   "last_chunk_tokens": whole_numbers(n - (calls - 1) * c)}
    res.assume("Every call computes a full chunk of c positions (linear layers on padded positions); attention over "
               "the padding is not counted.")
    res.headline = hf.sentence(
        f"{hf.fmt_count(first(n))} tokens in chunks of {hf.fmt_count(first(c))} take {hf.plural(first(calls), 'call')} "
        f"computing {hf.fmt_count(first(padded))} positions, {hf.fmt_count(first(extra))} of them padding "
        f"({hf.fmt_pct(first(waste))}){hf.sweep_note(req.tokens, req.chunk_tokens)}")
    return res


# =========================================================================== encoder tokens

class ImageInput(CalcRequest):
    height_px: PosInt = Field(description="Image height after preprocessing, pixels.", examples=[640])
    width_px: PosInt = Field(description="Image width after preprocessing, pixels.", examples=[640])
    patch_px: PosInt = Field(16, description="Patch side, pixels.", examples=[16])
    merge: PosInt = Field(2, description="Patches merged per side into one token (2 = 2×2 → 1).", examples=[2])
    frames: PosInt = Field(1, description="Frames (1 for a still image).", examples=[1])
    temporal_patch: PosInt = Field(1, description="Frames per temporal patch (a still image is padded up to this, "
                                   "so it counts one temporal group).", examples=[2])


class AudioInput(CalcRequest):
    mel_frames: PosInt = Field(description="Mel-spectrogram frames of the clip.", examples=[1000])
    chunk_frames: PosInt = Field(100, description="Frames per encoder chunk (the encoder's window).", examples=[100])
    stride2_stages: Annotated[int, Field(ge=0, le=30)] = Field(3, description="Stride-2 downsampling stages per chunk; each halves the "
                                      "length, rounding up.", examples=[3])


class EncoderTokensRequest(CalcRequest):
    image: ImageInput | None = Field(None, description="An image or video clip through a ViT with patch merging.")
    audio: AudioInput | None = Field(None, description="An audio clip through a chunked, downsampling encoder.")


@quiet
def encoder_compute(req: EncoderTokensRequest, lookup: Lookup) -> Result:
    if req.image is None and req.audio is None:
        raise CalcInputError("image", "give image and/or audio")
    res = Result(inputs=request_inputs(req), outputs={})
    o: dict = {}
    parts = []
    if req.image is not None:
        im = req.image
        side = im.patch_px * im.merge
        for k, v in (("height_px", im.height_px), ("width_px", im.width_px)):
            if v % side:
                raise CalcInputError(("image", k), f"must be a multiple of patch_px × merge = {side} (resize first)")
        gh, gw = im.height_px // im.patch_px, im.width_px // im.patch_px
        gt = math.ceil(im.frames / im.temporal_patch)
        patches = res.step("patches", "ceil(frames / t) × (H / p) × (W / p)",
                           f"{gt} × {im.height_px}/{im.patch_px} × {im.width_px}/{im.patch_px}", gt * gh * gw, "patches")
        tokens = res.step("visual tokens", "patches / merge²", f"{patches} / {im.merge}²", patches // (im.merge ** 2),
                          "positions")
        o.update({"grid": [gt, gh, gw], "patches": patches, "visual_tokens": tokens})
        parts.append(f"the image gives {hf.fmt_count(patches)} patches → {hf.fmt_count(tokens)} visual tokens")
    if req.audio is not None:
        a = req.audio
        full, rest = divmod(a.mel_frames, a.chunk_frames)

        def down(n: int) -> int:
            for _ in range(a.stride2_stages):
                n = -(-n // 2)
            return n
        per = down(a.chunk_frames)
        tail = down(rest) if rest else 0
        res.step("positions per full chunk", f"ceil(· / 2) applied {a.stride2_stages} times",
                 f"{a.chunk_frames} → {per}", per, "positions")
        pos = res.step("audio positions", "full chunks × per chunk + tail", f"{full} × {per} + {tail}",
                       full * per + tail, "positions")
        o.update({"audio_chunks": full + (1 if rest else 0), "positions_per_chunk": per, "audio_positions": pos})
        parts.append(f"{hf.fmt_count(a.mel_frames)} mel frames give {hf.fmt_count(pos)} audio positions")
    res.outputs = o
    res.assume("Image sides are already resized to multiples of patch × merge; no token pruning or special tokens "
               "(vision start/end markers) are counted.",
               "Audio: each chunk is encoded on its own and every stride-2 stage rounds its length up.")
    res.headline = hf.sentence("; ".join(parts))
    return res


# =========================================================================== packed-loss mean

class PackedGroup(CalcRequest):
    tokens: PosInt = Field(description="Label tokens of the sequence (or group).", examples=[1024])
    value: float = Field(ge=-1e15, le=1e15, allow_inf_nan=False,
                         description="Per-token loss or gradient of this sequence (its mean over its tokens).",
                         examples=[1.0])


class PackedLossRequest(CalcRequest):
    groups: list[PackedGroup] = Field(min_length=1, max_length=10_000, description="Sequences packed into one batch.")


@quiet
def packed_compute(req: PackedLossRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    n = np.array([g.tokens for g in req.groups], dtype=float)
    v = np.array([g.value for g in req.groups], dtype=float)
    total = n.sum()
    w = n / total
    tok = res.step("token-weighted mean", "Σ nᵢ·gᵢ / Σ nᵢ", " + ".join(f"{num(a)}×{num(b)}" for a, b in zip(n, v))
                   + f" / {num(total)}", float((w * v).sum()), "per token")
    grp = res.step("mean of per-sequence means", "Σ gᵢ / k", f"{num(v.sum())} / {len(v)}", float(v.mean()), "per token")
    res.outputs = out({"token_mean": tok, "group_mean": grp, "difference": grp - tok, "total_tokens": total,
                       "token_weights": w.tolist(), "group_weights": [1.0 / len(v)] * len(v)})
    res.assume("Every label token should weigh the same; a mean of per-sequence means gives each sequence the same "
               "weight instead, so short sequences count more per token.")
    res.headline = hf.sentence(f"The per-token mean over {hf.fmt_count(total)} tokens is {hf.fmt_num(tok, 4)}; "
                               f"averaging the {len(v)} sequence means gives {hf.fmt_num(grp, 4)}")
    return res


# =========================================================================== outputs

class ChunkPaddingOutputs(Outputs):
    """Outputs of chunk-padding; lists where tokens or chunk_tokens is swept."""

    calls: int | list[int] = Field(description="Calls, ceil(n / c).")
    padded_tokens: int | list[int] = Field(description="Positions computed, calls × c.")
    padding_tokens: int | list[int] = Field(description="Padded positions, calls × c − n.")
    waste_fraction: float | list[float] = Field(description="Share of computed positions that are padding.")
    last_chunk_tokens: int | list[int] = Field(description="Real positions in the last call.")


class EncoderTokensOutputs(Outputs):
    """Outputs of encoder-tokens: the image part with `image`, the audio part with `audio`."""

    grid: list[int] | None = Field(None, description="Patch grid [temporal groups, rows, columns] (with image).")
    patches: int | None = Field(None, description="Patches of the image or clip (with image).")
    visual_tokens: int | None = Field(None, description="Positions after merging, patches / merge² (with image).")
    audio_chunks: int | None = Field(None, description="Encoder chunks, a partial last one included (with audio).")
    positions_per_chunk: int | None = Field(None, description="Positions of one full chunk after the stride-2 stages "
                                            "(with audio).")
    audio_positions: int | None = Field(None, description="Positions of the whole clip (with audio).")


class PackedLossMeanOutputs(Outputs):
    """Outputs of packed-loss-mean, in the unit of the per-token values."""

    token_mean: float | None = Field(description="Token-weighted mean Σ nᵢ·gᵢ / Σ nᵢ.")
    group_mean: float | None = Field(description="Mean of the per-sequence means Σ gᵢ / k.")
    difference: float | None = Field(description="group_mean − token_mean.")
    total_tokens: float | None = Field(description="Label tokens in all, Σ nᵢ (a whole number, written as a float).")
    token_weights: list[float | None] = Field(description="Weight of each sequence in the token mean, nᵢ / Σ n.")
    group_weights: list[float | None] = Field(description="Weight of each sequence in the group mean, 1 / k.")


CALCULATORS = [
    Calculator(
        name="chunk-padding",
        profile=Profile(4.1e-07, 355, 42),
        family="other",
        title="Padding of fixed-size chunks",
        summary="Calls, computed positions and wasted padding when a prompt of n tokens is processed in fixed chunks "
                "of c positions.",
        description="calls = ceil(n / c); computed = calls × c; padding = computed − n; waste = padding / computed. "
                    "Limits: linear-layer positions only; attention over padding and kernels that skip the padded tail "
                    "are not modelled.",
        request_model=ChunkPaddingRequest,
        compute=chunk_compute,
        outputs_model=ChunkPaddingOutputs,
        example={"tokens": 513, "chunk_tokens": [256, 128]},
        cases=("component-utilization-and-overlap",),
        sweepable=("tokens", "chunk_tokens"),
        chart=Chart(x="chunk_tokens", y=("padding_tokens",), x_label="chunk size", y_label="padded positions"),
    ),
    Calculator(
        name="encoder-tokens",
        family="other",
        title="Positions from image and audio encoders",
        summary="How many positions an image (patches merged k×k) or an audio clip (mel frames in chunks, halved by "
                "stride-2 stages) adds to the language model's prompt.",
        description="Image: patches = ceil(frames / t) × (H/p) × (W/p); tokens = patches / merge². Audio: each chunk of "
                    "c frames is halved (rounding up) by every stride-2 stage; positions = full chunks × per-chunk "
                    "positions + the tail chunk's. Limits: no pruning, no special tokens, sides pre-resized.",
        request_model=EncoderTokensRequest,
        compute=encoder_compute,
        outputs_model=EncoderTokensOutputs,
        example={"image": {"height_px": 640, "width_px": 640, "patch_px": 16, "merge": 2},
                 "audio": {"mel_frames": 1000, "chunk_frames": 100, "stride2_stages": 3}},
        cases=("multimodal-stage-placement", "generative-multimodal-models"),
    ),
    Calculator(
        name="packed-loss-mean",
        family="other",
        title="Token-weighted loss of packed sequences",
        summary="The per-token mean of a loss or gradient over packed sequences of different lengths, against the mean "
                "of per-sequence means that grouping can introduce.",
        description="token mean = Σ nᵢgᵢ / Σ nᵢ (weights nᵢ/Σn); group mean = Σ gᵢ / k (weights 1/k). They agree only "
                    "when all sequences have the same length or the same value. Limits: one scalar per sequence.",
        request_model=PackedLossRequest,
        compute=packed_compute,
        outputs_model=PackedLossMeanOutputs,
        example={"groups": [{"tokens": 1024, "value": 1}, {"tokens": 7168, "value": 3}]},
        cases=("training-compute",),
    ),
]
