"""chunk-padding, encoder-tokens, packed-loss-mean: book examples by hand, plus invariants."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from calculators.framework import CalcInputError, no_lookup
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)


def calc(name, body):
    return run(name, body, no_lookup)[2].outputs


def test_chunk_padding_513():
    o = calc("chunk-padding", {"tokens": 513, "chunk_tokens": [256, 128]})
    assert o["calls"] == [3, 5]
    assert o["padded_tokens"] == [768, 640]
    assert o["padding_tokens"] == [255, 127]


@given(st.integers(1, 10**6), st.integers(1, 4096))
def test_padding_below_one_chunk(n, c):
    o = calc("chunk-padding", {"tokens": n, "chunk_tokens": c})
    assert 0 <= o["padding_tokens"] < c
    assert o["padded_tokens"] == n + o["padding_tokens"]


def test_qwen3_vl_image_and_omni_audio():
    o = calc("encoder-tokens", {"image": {"height_px": 640, "width_px": 640, "patch_px": 16, "merge": 2},
                                "audio": {"mel_frames": 1000, "chunk_frames": 100, "stride2_stages": 3}})
    assert (o["patches"], o["visual_tokens"]) == (1600, 400)
    assert (o["positions_per_chunk"], o["audio_positions"]) == (13, 130)


def test_audio_tail_chunk():
    o = calc("encoder-tokens", {"audio": {"mel_frames": 1050, "chunk_frames": 100, "stride2_stages": 3}})
    assert o["audio_positions"] == 130 + 7  # 50 -> 25 -> 13 -> 7


def test_encoder_refusals():
    with pytest.raises(CalcInputError):
        calc("encoder-tokens", {})
    with pytest.raises(CalcInputError):
        calc("encoder-tokens", {"image": {"height_px": 650, "width_px": 640}})


def test_packed_loss():
    o = calc("packed-loss-mean", {"groups": [{"tokens": 1024, "value": 1}, {"tokens": 7168, "value": 3}]})
    assert o["token_mean"] == pytest.approx(2.75)
    assert o["group_mean"] == pytest.approx(2.0)


@given(st.integers(1, 10**5), st.floats(-100, 100), st.floats(-100, 100))
def test_equal_lengths_agree(n, a, b):
    o = calc("packed-loss-mean", {"groups": [{"tokens": n, "value": a}, {"tokens": n, "value": b}]})
    assert o["token_mean"] == pytest.approx(o["group_mean"], abs=1e-9)
