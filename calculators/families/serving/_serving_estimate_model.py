"""The steady state of one continuously batched replica, the way `vllm bench serve` measures it: pure arithmetic over
a step curve, no store and no request model (the calculator `serving-estimate` builds the curve from the step model).

How the engine runs (vLLM V1, SGLang and TensorRT-LLM schedule alike): every step decodes one token of each running
request and, within a token budget, adds prefill chunks of requests that arrived. A request's prefill therefore does
not get a step of its own; it lengthens the steps every running request is decoding in. In the mean:

- a decode step of B running requests takes D(B) (kernels + collectives, at the mean decode context);
- one request's prefill adds P seconds to the steps it shares (its chunks' time minus the weight reads those steps
  make anyway), spread over `chunks` steps of the token budget;
- at a completion rate X, a fraction X·P of the time goes to prefill work, so the mean step is
  T = D(B) / (1 − X·P), and T is the time per output token (TPOT) every running request sees;
- a request holds a KV slot from admission to its last token: TTFT_service + (O − 1)·T, where TTFT_service is the
  rest of the step running when it arrived (a whole step in a closed loop, whose next request arrives just after a
  step began; half a step on average for Poisson arrivals) plus its chunks' steps, each a mean step with the chunk
  in it (chunks · T + P);
- closed loop (N users, each sending the next request when one ends): M = min(N, slots) requests hold slots,
  X = M / (TTFT_service + (O − 1)·T), B = X·(O − 1)·T decode; users beyond the slots wait, so
  TTFT = N / X − (O − 1)·T (Little's law over the whole cycle);
- open loop (Poisson rate λ): X = λ, B = λ·(O − 1)·T; stable while λ·P < 1 and B fits the slots; the wait for a
  share of the token budget is an M/D/1 queue whose tail gives the TTFT percentiles.

`simulate` runs the same engine step by step (event level, one replica) so tests can check the closed forms.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StepCurve:
    """A replica's step times: the decode step at each batch of a grid, and one request's prefill."""

    batches: np.ndarray          # ascending decode batch sizes (≥ 1)
    decode_s: np.ndarray         # decode step at each batch, kernels + collectives (s)
    decode_comm_s: np.ndarray    # of which collectives (s)
    prefill_s: np.ndarray | float   # time one request's prefill adds to steps of each batch of the grid (s)
    prefill_comm_s: np.ndarray | float   # of which collectives (s)
    chunks: int                  # steps its prefill is spread over (⌈new input tokens / token budget⌉)
    #: a step's kernels (+ collectives) without attention over context, N(t), at t tokens of a grid: what the
    #: prefill tokens of a simulated step cost beside its decodes is N(decodes + prefill tokens) − N(decodes), plus
    #: their own causal attention (`own_per_token_s` each); without them a run prices each prefilled token at P ÷
    #: prompt tokens (one prompt's cost, which misprices a step that packs many prompts into the budget)
    tokens: np.ndarray | None = None
    tokens_s: np.ndarray | None = None
    own_per_token_s: float = 0.0

    def prefill(self, b) -> float:
        """What one prefill adds to steps that decode b requests (its tokens join their GEMMs and expert reads)."""
        p = np.broadcast_to(np.asarray(self.prefill_s, dtype=float), self.batches.shape)
        return float(np.interp(max(float(b), float(self.batches[0])), self.batches, p))

    def prefill_tokens(self, b: float, t: float, new_tokens: float) -> float:
        """What t prefill tokens add to a step that decodes b requests."""
        if t <= 0:
            return 0.0
        if self.tokens is None:
            return t * self.prefill(max(b, 1.0)) / new_tokens
        n = lambda x: float(np.interp(x, self.tokens, self.tokens_s))
        return max(n(b + t) - n(b), 0.0) + t * self.own_per_token_s

    def decode(self, b) -> np.ndarray:
        """Decode step at batch b (linear between grid points, never below batch 1's step)."""
        return np.interp(np.maximum(np.asarray(b, dtype=float), self.batches[0]), self.batches, self.decode_s)

    def decode_comm(self, b) -> np.ndarray:
        return np.interp(np.maximum(np.asarray(b, dtype=float), self.batches[0]), self.batches, self.decode_comm_s)


@dataclass
class SteadyState:
    """One replica's steady state (seconds, requests/s, requests)."""

    stable: bool
    completion_rate_per_s: float     # X
    decode_batch: float              # B, requests decoding in a step (mean)
    in_service: float                # requests holding a KV slot (mean)
    step_s: float                    # T, the mean step = TPOT
    decode_step_s: float             # D(B)
    prefill_fraction: float          # X·P, share of the time spent on prefill work
    ttft_service_s: float            # own prefill + the rest of the running step
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    queue_wait_s: float              # mean wait for a KV slot (closed loop beyond the slots) or the budget (open)
    e2e_s: float
    iterations: int
    duration_s: float | None = None        # a simulated run's length (None in the steady state)
    tpot_p50_s: float | None = None        # a simulated run's median TPOT
    output_tokens: float | None = None     # a simulated run's mean output tokens per request


_ITER = 200
_TOL = 1e-10


_Z = {0.5: 0.0, 0.9: 1.2815515655446004, 0.99: 2.3263478740408408}


def _ttft(curve: StepCurve, d: float, t: float, residual_steps: float, p: float) -> tuple[float, tuple[float, float, float]]:
    """(mean, (p50, p90, p99)) of the time from reaching the engine to the first token, without queueing: the rest of
    the running step (`residual_steps` × T), then `chunks` steps that each hold one of the request's chunks (P /
    chunks) beside the decode work D and the chunks of other prefills. Those others arrive at random: their count is
    Poisson with the mean that makes the steps average T, and its normal approximation gives the percentiles."""
    c = curve.chunks
    base = residual_steps * t + c * d + p
    per_other = p / c if p > 0 else 0.0
    mu = c * (t - d) / per_other if per_other > 0 else 0.0
    qs = tuple(base + per_other * max(mu + z * math.sqrt(mu), 0.0) for z in _Z.values())
    return base + per_other * mu, qs       # the mean is residual × T + chunks × T + P


def _tail(wait_mean: float, rho: float) -> tuple[float, float, float]:
    """Percentiles of an M/D/1 wait: 0 with probability 1 − ρ, exponential beyond (its usual approximation)."""
    theta = wait_mean / rho if rho > 0 else 0.0
    return tuple(theta * math.log(rho / (1.0 - q)) if rho > 1.0 - q and theta > 0 else 0.0 for q in _Z)


def closed_loop(curve: StepCurve, users: float, output_tokens: float, slots: float) -> SteadyState:
    """N = `users` clients with no think time over `slots` KV slots (the KV capacity and max_num_seqs). A client's next
    request reaches the engine just after the step that finished the last one began, so it waits that whole step."""
    o1 = max(output_tokens - 1.0, 0.0)
    held = min(users, slots)
    b = max(held * o1 / max(output_tokens, 1.0), 1.0)
    x = t = d = p = 0.0
    it = 0
    for it in range(1, _ITER + 1):
        d, p = float(curve.decode(b)), curve.prefill(b)
        x = _cycle_rate(held, d, p, curve.chunks + 1.0 + o1)
        t = d / (1.0 - x * p)
        b_new = max(x * o1 * t, 1.0) if o1 > 0 else 1.0
        if abs(b_new - b) <= _TOL * max(b, 1.0):
            b = b_new
            break
        b = 0.5 * (b + b_new)
    service, (p50, p90, p99) = _ttft(curve, d, t, 1.0, p)
    cycle = service + o1 * t
    wait = max(users / x - cycle, 0.0) if x > 0 else math.inf
    return SteadyState(True, x, b, held, t, d, x * p, service, service + wait, p50 + wait, p90 + wait,
                       p99 + wait, wait, service + wait + o1 * t, it)


def _cycle_rate(held: float, d: float, p: float, steps: float) -> float:
    """X with held = X·(P + steps·T) and T = D / (1 − X·P): after multiplying by (1 − X·P),
    P²·X² − (P + steps·D + held·P)·X + held = 0, whose root below 1/P is the rate."""
    if p <= 0:
        return held / (steps * d)
    a, bb, c = p * p, -(p + steps * d + held * p), held
    disc = bb * bb - 4 * a * c
    x = (-bb - math.sqrt(max(disc, 0.0))) / (2 * a)
    return min(x, 0.999 / p)


def open_loop(curve: StepCurve, rate_per_s: float, output_tokens: float, slots: float, budget_share: float) -> SteadyState:
    """Poisson arrivals at `rate_per_s`; `budget_share` is one prefill's share of a step's token budget
    (new input tokens / budget), which sets how long the budget queue serves one request (in steps)."""
    o1 = max(output_tokens - 1.0, 0.0)
    x = rate_per_s
    b = max(x * o1 * float(curve.decode(1.0)), 1.0)
    t = d = p = 0.0
    it = 0
    for it in range(1, _ITER + 1):
        d, p = float(curve.decode(b)), curve.prefill(b)
        if x * p >= 1.0:
            return _unstable(x)
        t = d / (1.0 - x * p)
        b_new = max(x * o1 * t, 1.0) if o1 > 0 else 1.0
        if b_new > 4 * slots:
            return _unstable(x)
        if abs(b_new - b) <= _TOL * max(b, 1.0):
            b = b_new
            break
        b = 0.5 * (b + b_new)
    service, qs = _ttft(curve, d, t, 0.5, p)
    held = x * (service + o1 * t)
    if held > slots:
        return _unstable(x)
    # the token budget as a server: each request takes budget_share of a step of T
    s = budget_share * t
    rho = min(x * s, 0.999)
    wq = rho * s / (2.0 * (1.0 - rho)) if rho > 0 else 0.0
    p50, p90, p99 = (q + w for q, w in zip(qs, _tail(wq, rho)))
    return SteadyState(True, x, b, held, t, d, x * p, service, service + wq, p50, p90, p99, wq,
                       service + wq + o1 * t, it)


def _unstable(x: float) -> SteadyState:
    nan = math.nan
    return SteadyState(False, x, nan, nan, nan, nan, nan, nan, math.inf, math.inf, math.inf, math.inf, math.inf,
                       math.inf, 0)


def simulate(curve: StepCurve, users: int, output_tokens: int, slots: int, requests: int,
             prefills_per_step: int | None = None, spread: float = 0.5, seed: int = 0) -> dict:
    """Step-by-step closed-loop run of one replica (for tests): `users` clients; a request admitted to a free slot is
    prefilled over `curve.chunks` steps (at most `prefills_per_step` requests' chunks in a step), then decodes one
    token a step; a step lasts D(decoding requests) plus P / chunks for every chunk in it (D(1) when only prefill
    runs). A finished client's next request reaches the engine during the next step, so it joins the one after.
    Output lengths are uniform over output_tokens × [1 − spread, 1 + spread] (fixed lengths keep the clients in
    lockstep forever, which no benchmark with varied prompts shows). Mean TTFT, TPOT, e2e and completion rate over
    `requests` completions after a warm-up of as many."""
    rng = np.random.default_rng(seed)
    lo, hi = max(2, round(output_tokens * (1 - spread))), max(2, round(output_tokens * (1 + spread)))
    now = 0.0
    waiting: list[float] = [0.0] * users                 # arrival times of requests waiting for a slot
    arriving: list[float] = []                          # sent during the running step: they wait for the next one
    prefilling: list[list[float]] = []                  # [arrival, chunks left]
    decoding: list[list[float]] = []                    # [arrival, first token time, tokens left, output tokens]
    done: list[tuple[float, float, float, float]] = []
    cap = prefills_per_step or 10**9
    while len(done) < 2 * requests:
        while waiting and len(prefilling) + len(decoding) < slots:
            prefilling.append([waiting.pop(0), float(curve.chunks)])
        chunk_reqs = prefilling[:cap]
        b = len(decoding)
        step = float(curve.decode(max(b, 1))) if (b or chunk_reqs) else 0.0
        step += len(chunk_reqs) * curve.prefill(max(b, 1)) / curve.chunks
        now += step
        waiting.extend(arriving)
        arriving = []
        for r in decoding:
            r[2] -= 1
        for r in [r for r in decoding if r[2] <= 0]:
            done.append((r[0], r[1], now, r[3]))
            arriving.append(now)
        decoding = [r for r in decoding if r[2] > 0]
        for r in chunk_reqs:
            r[1] -= 1
        for r in [r for r in prefilling if r[1] <= 0]:
            n_out = int(rng.integers(lo, hi + 1)) if output_tokens > 1 else 1
            if n_out > 1:
                decoding.append([r[0], now, float(n_out - 1), float(n_out)])
            else:
                done.append((r[0], now, now, 1.0))
                arriving.append(now)
        prefilling = [r for r in prefilling if r[1] > 0]
    kept = done[requests:]
    ttft = np.array([f - a for a, f, _, _ in kept])
    tpot = np.array([(e - f) / (o - 1) for _, f, e, o in kept if o > 1])
    ends = sorted(e for _, _, e, _ in kept)
    span = ends[-1] - ends[0]
    return {"ttft_s": float(ttft.mean()), "tpot_s": float(tpot.mean()) if tpot.size else 0.0,
            "e2e_s": float(np.mean([e - a for a, _, e, _ in kept])),
            "completion_rate_per_s": (len(kept) - 1) / span if span > 0 else math.nan}


@dataclass
class RunResult:
    """A finite benchmark run simulated step by step: means over its requests, and its throughput."""

    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_mean_s: float
    tpot_p50_s: float
    e2e_mean_s: float
    duration_s: float
    output_tokens: float
    decode_batch: float          # requests decoding in a step, time-weighted mean
    in_service: float            # requests holding a slot, time-weighted mean
    prefill_fraction: float      # share of the run's time spent on prefill work
    steps: int


#: steps a simulated run may take (the cost model prices a run by its prompts × output tokens before it starts)
MAX_RUN_STEPS = 400_000


def run(curve: StepCurve, prompts: int, users: int, input_tokens: float, output_tokens: float, slots: int,
        budget: int, new_tokens: float, output_spread: float = 0.0, input_spread: float = 0.0,
        seed: int = 0, mixed: bool = True, skip_spans: bool = True) -> RunResult:
    """`prompts` requests through one engine, `users` at a time (a closed loop that stops after `prompts`; users =
    prompts is a burst, `--request-rate inf` without a concurrency cap). Each step decodes one token of every
    running request and spends the rest of the token budget on the waiting prefills in arrival order (chunked
    prefill, the FCFS order of vLLM V1 and SGLang); it lasts D(decoding requests) plus what its prefill tokens add
    (`StepCurve.prefill_tokens`: the step's GEMMs and expert reads at decodes + prefill tokens rather than decodes
    alone, plus the chunks' own attention).
    Lengths are uniform over mean × [1 − spread, 1 + spread]. Metrics as `vllm bench serve` prints them: TTFT
    and TPOT = (e2e − TTFT) / (output − 1) per request, then their mean and percentiles. `mixed=False` is an engine
    that does not mix prefill chunks into decode steps (SGLang without --enable-mixed-chunk): a step with waiting
    prefills is a prefill step of the whole budget, and the running requests decode nothing in it.
    `skip_spans` takes a span of pure decode steps (no prefill waiting, nobody finishing or admitted) in one move
    instead of step by step: the same run (the steps are identical), 5–10× less CPU on long closed loops."""
    rng = np.random.default_rng(seed)

    def lengths(mean: float, spread: float) -> np.ndarray:
        if spread <= 0:
            return np.full(prompts, float(max(1, round(mean))))
        return np.maximum(1.0, np.round(rng.uniform(mean * (1 - spread), mean * (1 + spread), prompts)))

    out = lengths(output_tokens, output_spread)
    pre = lengths(input_tokens, input_spread)
    pre_left = pre.copy()
    dec_left = out - 1.0
    arrive = np.full(prompts, np.inf)
    arrive[:min(users, prompts)] = 0.0
    sent = min(users, prompts)
    first = np.full(prompts, np.nan)
    end = np.full(prompts, np.nan)
    admitted = np.zeros(prompts, dtype=bool)
    now = busy_pf = bw = sw = 0.0
    steps = 0
    head = 0                                    # the next request to admit, in arrival order
    active_n = 0
    while np.isnan(end).any():
        # admit arrived requests while slots are free
        while head < sent and active_n < slots and arrive[head] <= now:
            admitted[head] = True
            active_n += 1
            head += 1
        live = admitted & np.isnan(end)
        decoding = live & (pre_left <= 0)
        waiting_pf = np.flatnonzero(live & (pre_left > 0))
        if not mixed and waiting_pf.size:
            decoding = np.zeros(prompts, dtype=bool)      # a prefill step: the running requests wait
        nd = int(decoding.sum())
        room = max(budget - nd, 0)
        alloc = np.zeros(prompts)
        if waiting_pf.size and room:
            want = pre_left[waiting_pf]
            cum = np.cumsum(want)
            take = np.clip(room - (cum - want), 0, want)
            alloc[waiting_pf] = take
        tok = float(alloc.sum())
        if skip_spans and tok == 0 and nd > 0 and waiting_pf.size == 0:
            # a span of pure decode steps: nobody finishes, nobody is admitted and every step lasts D(nd) until the
            # first running request's last token or the next admissible arrival; take all but its last step at once
            d = float(curve.decode(nd))
            m = int(dec_left[decoding].min()) - 1
            if head < sent and active_n < slots:
                m = min(m, math.ceil((arrive[head] - now) / d) - 1)
            if m >= 1:
                now += m * d
                steps += m
                bw += nd * d * m
                sw += active_n * d * m
                dec_left[decoding] -= m
                if steps > MAX_RUN_STEPS:
                    raise ValueError(f"the run takes more than {MAX_RUN_STEPS:,} steps")
                continue
        if nd == 0 and tok == 0:
            nxt = arrive[head] if head < sent else np.inf
            if not np.isfinite(nxt):
                break
            now = max(now, float(nxt))
            continue
        d = float(curve.decode(max(nd, 1)))
        added = curve.prefill_tokens(nd, tok, new_tokens)
        step = d + added
        now += step
        steps += 1
        busy_pf += added
        bw += nd * step
        sw += active_n * step
        dec_left[decoding] -= 1.0
        done_dec = decoding & (dec_left <= 0)
        pre_left -= alloc
        done_pf = (alloc > 0) & (pre_left <= 0)
        first[done_pf] = now
        done = done_dec | (done_pf & (dec_left <= 0))
        end[done] = now
        k = int(done.sum())
        if k:
            active_n -= k
            # each finished user sends its next request: it reaches the engine during the next step
            new = min(k, prompts - sent)
            if new > 0:
                arrive[sent:sent + new] = now + 1e-9
                sent += new
        if steps > MAX_RUN_STEPS:
            raise ValueError(f"the run takes more than {MAX_RUN_STEPS:,} steps")
    ttft = first - np.where(np.isfinite(arrive), arrive, 0.0)
    multi = out > 1
    tpot = (end[multi] - first[multi]) / (out[multi] - 1.0)
    dur = float(np.nanmax(end))
    return RunResult(float(ttft.mean()), *[float(np.percentile(ttft, q)) for q in (50, 90, 99)],
                     float(tpot.mean()) if tpot.size else 0.0, float(np.median(tpot)) if tpot.size else 0.0,
                     float(np.mean(end - np.where(np.isfinite(arrive), arrive, 0.0))), dur, float(out.sum()),
                     bw / now if now else 0.0, sw / now if now else 0.0, busy_pf / now if now else 0.0, steps)


__all__ = ["MAX_RUN_STEPS", "RunResult", "StepCurve", "SteadyState", "closed_loop", "open_loop", "run", "simulate"]
