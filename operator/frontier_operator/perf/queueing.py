"""Continuous batching as a queue: steady state at a request rate (open loop) or at a concurrency (closed loop).

SGLang runs one forward at a time and gives prefill priority over decode (no mixed chunks by default), so:

* every running request advances one token per decode iteration, and each prefill that arrives meanwhile
  pauses all of them — TPOT = D(B) / (1 − ρ), where D(B) is the decode iteration at batch B and ρ the share
  of time spent prefilling; the batch itself follows from Little's law, B = λ·(OSL − 1)·TPOT;
* an arriving request waits for the forward in progress, then for the prefills queued before it (a G/G/1
  queue, Kingman's approximation with the arrival and service variability), then for its own prefill;
* in P/D the decode workers are never paused; TTFT adds the KV transfer and the hand-off to decode.

A closed-loop benchmark (C clients that resend as soon as a reply ends) adds one effect an open loop does
not have: clients finishing together come back together, so their prompts queue as a *wave*. The
calibrated `wave_sync` blends that synchronised picture with the desynchronised steady state; the more of
its time the GPU spends prefilling, the faster waves break apart (`wave_breakup`). A run of R requests per
client also starts with every client sending at once onto an idle server: its first C requests are a wave
whatever the lengths, a share 1/R of the mean the run reports (`first_wave_share`).

A server launched with `--scheduler-recv-interval N` (InferenceX's B200 and B300 DeepSeek recipes use 10 and
30) takes new requests in only every N decode iterations (any prefill forward resets the count): an arrival,
which comes when a decode iteration ends a request, waits (N − 1)/2 iterations on average, and is prefilled
together with whatever arrived in the same window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from frontier_operator.perf.steps import PrefillCost

_MAX_ITERATIONS = 60
_TOLERANCE = 1e-6


@dataclass(frozen=True)
class DecodeService:
    """Decode side of one worker: seconds per output token at batch B (no prefill in between)."""

    token_seconds: Callable[[float], float]
    # Largest number of requests that run together (KV pool at mean occupancy, max-running-requests).
    capacity: float
    # Output tokens one decode iteration yields per request: 1, or the accept length of speculative decoding.
    tokens_per_step: float = 1.0

    def forward_s(self, token_s: float) -> float:
        """One decode forward at `token_s` per output token: under speculative decoding a whole draft-and-verify
        iteration, which yields `tokens_per_step` tokens."""
        return token_s * self.tokens_per_step


@dataclass(frozen=True)
class PrefillService:
    # A request prefilled on its own (arrivals spread out) and one in a full chunk (arrivals bunched).
    single: PrefillCost
    batched: PrefillCost
    # Fixed per-request time outside the GPU queues (HTTP, tokenizer, detokenizer).
    overhead_s: float
    # P/D only: KV transfer plus bootstrap from prefill to decode, and the first decode iteration.
    handoff_s: float = 0.0
    # Attention-DP ranks of one worker: each prefills its own requests, in the same forwards as the others
    # (the ranks meet in every MoE layer), so a worker is `ranks` prefill servers that pause decode together.
    ranks: int = 1

    @property
    def rank_service_s(self) -> float:
        """Time one rank spends on one request: alone, or alongside every other rank (a little longer)."""
        if self.ranks <= 1:
            return self.single.gpu_seconds_per_request
        return max(self.single.latency_s, self.batched.gpu_seconds_per_request * self.ranks)


def prefill_busy_share(offered: float, servers: int) -> float:
    """Share of time at least one of `servers` prefill servers works, at offered load `offered` = λ·S (M/M/c).

    One server: the utilisation itself. Several: 1 − P0 — concurrent prefills on different ranks share
    forwards, so decode pauses less than their summed work.
    """
    if offered <= 0:
        return 0.0
    if servers <= 1:
        return min(offered, 1.0)
    if offered >= servers:
        return 1.0
    term, series = 1.0, 1.0
    for k in range(1, servers):
        term *= offered / k
        series += term
    term *= offered / servers
    idle = 1.0 / (series + term / (1.0 - offered / servers))
    return 1.0 - idle


def prefill_queue(
    rate: float, prefill: PrefillService, arrival_cv: float, service_cv: float
) -> tuple[float, float, float]:
    """(mean wait, probability of waiting, decode-pause share) of one worker's prefill queue at `rate`.

    `ranks` servers of `rank_service_s` each (G/G/c, Sakasegawa's approximation: P(wait) ≈ ρ^(√(2(c+1)) − 1),
    W = P(wait)·S / (c·(1 − ρ)) · (c_a² + c_s²)/2); one server is Kingman's G/G/1. math.inf past saturation.
    """
    servers = max(1, prefill.ranks)
    service = prefill.rank_service_s
    utilization = rate * service / servers
    if utilization >= 1.0:
        return math.inf, 1.0, 1.0
    if utilization <= 0:
        return 0.0, 0.0, 0.0
    probability = utilization ** (math.sqrt(2.0 * (servers + 1.0)) - 1.0)
    wait = probability * service / (servers * (1.0 - utilization)) * (arrival_cv**2 + service_cv**2) / 2.0
    return wait, probability, prefill_busy_share(rate * service, servers)


@dataclass(frozen=True)
class SteadyState:
    rate_per_s: float
    decode_batch: float
    ttft_s: float
    tpot_s: float
    decode_token_s: float
    prefill_utilization: float
    prefill_wait_s: float
    saturated: bool
    # Waiting for a free running slot (KV pool or batch cap) once the batch nears capacity.
    slot_wait_s: float = 0.0
    slot_wait_probability: float = 0.0
    # Probability that an arriving prompt finds every prefill server busy.
    prefill_wait_probability: float = 0.0


def slot_wait(batch: float, capacity: float, residence_s: float, arrival_cv: float) -> tuple[float, float]:
    """Mean wait for one of `capacity` running slots (an M/G/c queue) and the probability of waiting at all.

    Sakasegawa's approximation of Erlang C, P(wait) ≈ u^√(2(c+1)) with u = batch / capacity, and the
    mean wait P(wait) · S / (c·(1 − u)) scaled by arrival burstiness: a large pool barely queues until it is
    almost full, then the wait explodes.
    """
    if capacity <= 0 or batch <= 0 or residence_s <= 0:
        return 0.0, 0.0
    utilization = min(batch / capacity, 0.999999)
    probability = utilization ** math.sqrt(2.0 * (capacity + 1.0))
    mean = probability * residence_s / (capacity * (1.0 - utilization)) * (1.0 + arrival_cv**2) / 2.0
    return mean, probability


def kingman_wait(utilization: float, service_s: float, arrival_cv: float, service_cv: float) -> float:
    """Mean queueing delay of a G/G/1 queue (Kingman): ρ/(1−ρ) · (c_a² + c_s²)/2 · service time."""
    if utilization <= 0:
        return 0.0
    if utilization >= 1:
        return math.inf
    return utilization / (1 - utilization) * (arrival_cv**2 + service_cv**2) / 2 * service_s


def _first_root(function: Callable[[float], float], upper: float) -> float | None:
    """Smallest x in (0, upper] where an increasing-then-crossing f(x) = F(x) − x changes sign, or None.

    f(0) > 0 is assumed. A geometric scan finds the first bracket (f convex in practice: decode time grows
    faster than linearly once compute-bound, so a second crossing can exist); regula falsi refines it.
    """
    if upper <= 0:
        return None
    lo, f_lo = 0.0, function(0.0)
    if f_lo <= 0:
        return 0.0
    hi = min(1.0, upper)
    while True:
        f_hi = function(hi)
        if f_hi <= 0:
            break
        if hi >= upper:
            return None
        lo, f_lo = hi, f_hi
        hi = min(upper, hi * 2.0)
    return _regula_falsi(function, lo, f_lo, hi, f_hi)


def _regula_falsi(function: Callable[[float], float], lo: float, f_lo: float, hi: float, f_hi: float) -> float:
    """Root of f in [lo, hi] with f(lo) > 0 ≥ f(hi) (Illinois variant: a handful of evaluations)."""
    side = 0
    x = hi
    for _ in range(_MAX_ITERATIONS):
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo) if f_hi != f_lo else 0.5 * (lo + hi)
        f_x = function(x)
        if abs(f_x) <= _TOLERANCE * max(1.0, abs(x)) or hi - lo <= _TOLERANCE * max(1.0, hi):
            return x
        if f_x > 0:
            lo, f_lo = x, f_x
            if side == 1:
                f_hi *= 0.5
            side = 1
        else:
            hi, f_hi = x, f_x
            if side == -1:
                f_lo *= 0.5
            side = -1
    return x


def open_loop_aggregated(
    rate_per_s: float,
    decode: DecodeService,
    prefill: PrefillService,
    output_tokens: float,
    *,
    arrival_cv: float,
    service_cv: float,
) -> SteadyState:
    """One aggregated worker fed `rate_per_s` requests per second."""
    steps = max(output_tokens - 1.0, 0.0)
    wait, wait_probability, rho = prefill_queue(rate_per_s, prefill, arrival_cv, service_cv)
    if rho >= 1.0 or not math.isfinite(wait):
        return _saturated(rate_per_s, decode, rho)
    slowdown = 1.0 / (1.0 - rho)
    demand = rate_per_s * steps * slowdown
    batch = _first_root(lambda b: demand * decode.token_seconds(max(b, 1.0)) - b, decode.capacity)
    if batch is None:
        return _saturated(rate_per_s, decode, rho)
    token_s = decode.token_seconds(max(batch, 1.0))
    tpot = token_s * slowdown
    # A new prompt also waits for the decode forward in flight (mean residual: half of it).
    residual = 0.5 * decode.forward_s(token_s) if batch > 0 else 0.0
    slot_s, slot_p = slot_wait(batch, decode.capacity, steps * tpot, arrival_cv)
    ttft = prefill.overhead_s + residual + wait + prefill.single.latency_s + slot_s
    return SteadyState(
        rate_per_s, batch, ttft, tpot, token_s, rho, wait + residual, False, slot_s, slot_p, wait_probability
    )


def open_loop_disaggregated(
    rate_per_s: float,
    decode: DecodeService,
    prefill: PrefillService,
    output_tokens: float,
    *,
    prefill_workers: int,
    decode_workers: int,
    arrival_cv: float,
    service_cv: float,
) -> SteadyState:
    """P/D: prefill workers share the rate, decode workers run undisturbed; batch is per decode worker."""
    steps = max(output_tokens - 1.0, 0.0)
    wait, wait_probability, rho = prefill_queue(rate_per_s / max(1, prefill_workers), prefill, arrival_cv, service_cv)
    if rho >= 1.0 or not math.isfinite(wait):
        return _saturated(rate_per_s, decode, rho)
    demand = rate_per_s / max(1, decode_workers) * steps
    batch = _first_root(lambda b: demand * decode.token_seconds(max(b, 1.0)) - b, decode.capacity)
    if batch is None:
        return _saturated(rate_per_s, decode, rho)
    token_s = decode.token_seconds(max(batch, 1.0))
    slot_s, slot_p = slot_wait(batch, decode.capacity, steps * token_s, arrival_cv)
    ttft = prefill.overhead_s + wait + prefill.single.latency_s + prefill.handoff_s + slot_s
    return SteadyState(rate_per_s, batch, ttft, token_s, token_s, rho, wait, False, slot_s, slot_p, wait_probability)


def _saturated(rate: float, decode: DecodeService, rho: float) -> SteadyState:
    token_s = decode.token_seconds(max(decode.capacity, 1.0))
    return SteadyState(rate, decode.capacity, math.inf, math.inf, token_s, min(rho, 1.0), math.inf, saturated=True)


def _rate_filling(batch: float, token_s: float, steps: float, prefill: PrefillService) -> float:
    """Aggregated: the rate λ at which `batch` requests are decoding, from λ·steps·D / (1 − u(λ)) = B.

    One prefill server: u = λ·p, so λ = B / (steps·D + B·p). Several (attention-DP ranks): u is the share of
    time any rank prefills, increasing in λ; the left side increases in λ, so bisection finds it.
    """
    servers = max(1, prefill.ranks)
    service = prefill.rank_service_s
    if servers == 1:
        denominator = steps * token_s + batch * service
        return batch / denominator if denominator > 0 else math.inf
    ceiling = servers / service if service > 0 else math.inf
    if steps * token_s <= 0:
        return ceiling
    low, high = 0.0, min(ceiling, batch / (steps * token_s))
    for _ in range(_RATE_BISECTIONS):
        middle = 0.5 * (low + high)
        if middle * steps * token_s < batch * (1.0 - prefill_busy_share(middle * service, servers)):
            low = middle
        else:
            high = middle
    return low


_RATE_BISECTIONS = 40


def max_rate_aggregated(decode: DecodeService, prefill: PrefillService, output_tokens: float) -> float:
    """Rate at which the running batch reaches capacity: λ = B / ((OSL − 1)·D(B) + B·p) at B = capacity."""
    capacity = max(decode.capacity, 1.0)
    steps = max(output_tokens - 1.0, 0.0)
    return _rate_filling(capacity, decode.token_seconds(capacity), steps, prefill)


def max_rate_disaggregated(
    decode: DecodeService, prefill: PrefillService, output_tokens: float, *, prefill_workers: int, decode_workers: int
) -> float:
    capacity = max(decode.capacity, 1.0)
    steps = max(output_tokens - 1.0, 0.0)
    decode_limit = decode_workers * capacity / (steps * decode.token_seconds(capacity)) if steps > 0 else math.inf
    prefill_limit = prefill_workers * max(1, prefill.ranks) / prefill.rank_service_s
    return min(decode_limit, prefill_limit)


# ---------------------------------------------------------------------------------------------------------
# Closed loop: `concurrency` clients, each sending its next request as soon as the previous one ends.


@dataclass(frozen=True)
class ClosedLoopResult:
    rate_per_s: float
    # Mean running requests per decode worker.
    decode_batch: float
    ttft_s: float
    tpot_s: float
    # Decode time per token at that batch without any prefill pause.
    decode_token_s: float
    # Mean wait for a free slot when the clients outnumber what the KV pool or the batch cap admits.
    slot_wait_s: float


def _wave_ttft(clients_per_prefill_worker: float, prefill: PrefillService) -> tuple[float, float]:
    """A synchronised wave: all prompts arrive at once and are prefilled in full chunks, one after another.

    Returns (mean time until a request's prefill completes, prefill time of the whole wave): requests of the
    k-th forward finish at k·t, so the mean over the wave is (P + t)/2. A wave smaller than a chunk holds is
    one forward of just its prompts, which every one of them waits for: 4 prompts of 1k tokens where a chunk
    takes 16 do not wait for a 16-prompt forward.
    """
    first = _forward_seconds(prefill, clients_per_prefill_worker)
    total = max(clients_per_prefill_worker * prefill.batched.gpu_seconds_per_request, first)
    return 0.5 * (total + first), total


def _forward_seconds(prefill: PrefillService, requests: float) -> float:
    """Latency of one prefill forward of `requests` prompts, at most a full chunk: affine in the prompts between
    one alone (`single`) and a full chunk (`batched`), since every prompt adds the same tokens and attention."""
    full, alone = prefill.batched, prefill.single
    if requests >= full.requests_per_batch or full.requests_per_batch <= 1:
        return full.latency_s
    share = (max(requests, 1.0) - 1.0) / (full.requests_per_batch - 1.0)
    return alone.latency_s + share * (full.latency_s - alone.latency_s)


def _held_for_receive(rate: float, step_s: float, recv_interval: int, prefill: PrefillService) -> tuple[float, float]:
    """(mean wait for the scheduler's next receive, time until the arrival's prefill completes) on a server that
    receives every `recv_interval` decode iterations of `step_s`: the prompts that arrived in one window are
    prefilled together, and an arrival sees itself and, on average, a window's worth of others (size-biased)."""
    window = (recv_interval - 1) * step_s
    return 0.5 * window, _wave_ttft(1.0 + rate * window, prefill)[0]


def _effective_sync(wave_sync: float, wave_breakup: float, prefill_utilization: float) -> float:
    """Waves survive while prefill is a small share of the GPU's time; every prefill that pauses a different
    subset of requests spreads their completion times, so synchronisation decays as prefill load grows.

    Prefill load spreads only what varying output lengths have loosened (the breakup scales with 1 − `wave_sync`):
    with fixed lengths (`wave_sync` 1) the wave re-forms every cycle whatever the load, since SGLang prefills
    everything waiting before it decodes again, so every request of the wave reaches its last token on the same
    iteration."""
    exponent = wave_breakup * (1.0 - wave_sync)
    remaining: float = (1.0 - min(max(prefill_utilization, 0.0), 1.0)) ** exponent
    return wave_sync * remaining


def _wave_weight(first_wave_share: float, steady_sync: float) -> float:
    """Share of a run's requests that queue as a wave: the first cycle's, then the steady state's share of the rest.

    The twin (`sim`, a discrete-event SGLang scheduler on the model's own step times) shows why the first cycle
    is kept apart: DeepSeek-R1 NVFP4 on 4×B200 at 128 clients, 8k/1k prompts drawn on [0.8, 1] × nominal, has a
    median TTFT of 0.34 s, one prompt's prefill, at 10 and at 30 requests per client, but a mean of 1.31 s and
    0.68 s: the first wave (10.7 s on average) is a tenth or a thirtieth of it."""
    share = min(max(first_wave_share, 0.0), 1.0)
    return share + (1.0 - share) * steady_sync


def _edge_wait(prefill: PrefillService, arrival_cv: float, service_cv: float) -> float:
    """The prefill queue's wait at 99.9 % utilisation: where a closed loop that outruns its prefill sits."""
    servers = max(1, prefill.ranks)
    edge = 0.999 * servers / max(prefill.rank_service_s, 1e-12)
    return prefill_queue(edge, prefill, arrival_cv, service_cv)[0]


def _solve_clients(implied_clients: Callable[[float], float], clients: float) -> float:
    """Decode batch B in (0, clients] at which the steady state holds exactly `clients` requests in flight."""
    f_hi = implied_clients(clients) - clients
    if f_hi <= 0:
        return clients
    lo, hi = 1e-9 * clients, clients
    f_lo = implied_clients(lo) - clients
    if f_lo >= 0:
        return lo
    # f is increasing in B; flip signs for the shared root finder, which expects f(lo) > 0.
    return _regula_falsi(lambda b: clients - implied_clients(b), lo, -f_lo, hi, -f_hi)


def closed_loop_aggregated(
    concurrency: float,
    decode: DecodeService,
    prefill: PrefillService,
    output_tokens: float,
    *,
    wave_sync: float,
    wave_breakup: float,
    arrival_cv: float = 1.0,
    service_cv: float = 0.0,
    recv_interval: int = 1,
    first_wave_share: float = 0.0,
) -> ClosedLoopResult:
    steps = max(output_tokens - 1.0, 1.0)
    running = max(1.0, min(concurrency, decode.capacity))
    p_latency = prefill.single.latency_s

    # Desynchronised steady state. Given the decode batch B: B = λ·steps·D/(1 − u(λ)) gives λ; the clients in
    # flight are λ·TTFT + B (Little); solve for the B that accounts for every running client.
    def rate_at(batch: float) -> tuple[float, float]:
        token_s = decode.token_seconds(max(batch, 1.0))
        return _rate_filling(batch, token_s, steps, prefill), token_s

    def queue_at(rate: float) -> tuple[float, float]:
        wait, _, busy = prefill_queue(rate, prefill, arrival_cv, service_cv)
        # The closed loop cannot exceed what the prefill serves; keep the queue finite at its edge.
        return (wait if math.isfinite(wait) else _edge_wait(prefill, arrival_cv, service_cv)), min(busy, 0.999)

    def ttft_at(rate: float, token_s: float) -> float:
        held, prefill_s = (
            (0.0, p_latency)
            if recv_interval <= 1
            else _held_for_receive(rate, decode.forward_s(token_s), recv_interval, prefill)
        )
        return prefill.overhead_s + 0.5 * decode.forward_s(token_s) + held + queue_at(rate)[0] + prefill_s

    def implied(batch: float) -> float:
        rate, token_s = rate_at(batch)
        return rate * ttft_at(rate, token_s) + batch

    batch = _solve_clients(implied, running)
    rate, token_s = rate_at(batch)
    desync_ttft = ttft_at(rate, token_s)
    utilization = queue_at(rate)[1]
    desync_tpot = token_s / (1.0 - utilization)
    wave_sync = _wave_weight(first_wave_share, _effective_sync(wave_sync, wave_breakup, utilization))

    # Synchronised waves: decode runs the whole batch, the wave's prefills hold it up once per cycle.
    token_full = decode.token_seconds(running)
    wave_wait, wave_total = _wave_ttft(running, prefill)
    wave_ttft = prefill.overhead_s + wave_wait
    wave_tpot = token_full + max(0.0, wave_total - wave_wait) / steps

    ttft = wave_sync * wave_ttft + (1 - wave_sync) * desync_ttft
    tpot = wave_sync * wave_tpot + (1 - wave_sync) * desync_tpot
    throughput = running / (ttft + steps * tpot)
    slot_wait = max(0.0, concurrency - running) / throughput
    mean_batch = wave_sync * running + (1 - wave_sync) * batch
    return ClosedLoopResult(throughput, mean_batch, ttft + slot_wait, tpot, token_full, slot_wait)


def closed_loop_disaggregated(
    concurrency: float,
    decode: DecodeService,
    prefill: PrefillService,
    output_tokens: float,
    *,
    prefill_workers: int,
    decode_workers: int,
    wave_sync: float,
    wave_breakup: float,
    arrival_cv: float = 1.0,
    service_cv: float = 0.0,
    first_wave_share: float = 0.0,
) -> ClosedLoopResult:
    steps = max(output_tokens - 1.0, 1.0)
    running = max(1.0, min(concurrency, decode.capacity * decode_workers))
    p_latency = prefill.single.latency_s

    def queue_at(rate: float) -> tuple[float, float]:
        wait, _, busy = prefill_queue(rate / max(1, prefill_workers), prefill, arrival_cv, service_cv)
        return (wait if math.isfinite(wait) else _edge_wait(prefill, arrival_cv, service_cv)), min(busy, 0.999)

    def ttft_at(rate: float) -> float:
        return prefill.overhead_s + queue_at(rate)[0] + p_latency + prefill.handoff_s

    def implied(total_batch: float) -> float:
        per_worker = max(total_batch / max(1, decode_workers), 1.0)
        rate = total_batch / (steps * decode.token_seconds(per_worker))
        return rate * ttft_at(rate) + total_batch

    total_batch = _solve_clients(implied, running)
    per_worker = max(total_batch / max(1, decode_workers), 1.0)
    desync_tpot = decode.token_seconds(per_worker)
    desync_rate = total_batch / (steps * desync_tpot)
    desync_ttft = ttft_at(desync_rate)
    utilization = queue_at(desync_rate)[1]
    wave_sync = _wave_weight(first_wave_share, _effective_sync(wave_sync, wave_breakup, utilization))

    full_per_worker = running / max(1, decode_workers)
    wave_tpot = decode.token_seconds(max(full_per_worker, 1.0))
    wave_wait, _ = _wave_ttft(running / max(1, prefill_workers), prefill)
    wave_ttft = prefill.overhead_s + wave_wait + prefill.handoff_s

    ttft = wave_sync * wave_ttft + (1 - wave_sync) * desync_ttft
    tpot = wave_sync * wave_tpot + (1 - wave_sync) * desync_tpot
    throughput = running / (ttft + steps * tpot)
    slot_wait = max(0.0, concurrency - running) / throughput
    mean_batch = wave_sync * full_per_worker + (1 - wave_sync) * per_worker
    return ClosedLoopResult(throughput, mean_batch, ttft + slot_wait, tpot, wave_tpot, slot_wait)


# ---------------------------------------------------------------------------------------------------------
# Percentiles


_Z = {50: 0.0, 90: 1.2815515655446004, 95: 1.6448536269514722, 99: 2.3263478740408408}


def lognormal_quantile(mean: float, cv: float, percentile: int) -> float:
    """Quantile of a log-normal with this mean and coefficient of variation (cv = 0: the mean itself)."""
    if cv <= 0 or mean <= 0:
        return mean
    sigma2 = math.log(1 + cv * cv)
    return mean * math.exp(_Z[percentile] * math.sqrt(sigma2) - sigma2 / 2)


def waiting_quantile(mean_wait: float, utilization: float, percentile: int) -> float:
    """Quantile of a queueing delay: zero with probability 1 − ρ, otherwise exponential with mean W/ρ.

    `utilization` is the probability of waiting at all (ρ for one server, Erlang C for many).

    The standard heavy-traffic shape of a G/G/1 waiting time; it makes p99 blow up as ρ → 1 while p50 stays
    at zero for a lightly loaded server.
    """
    if mean_wait <= 0 or utilization <= 0:
        return 0.0
    if not math.isfinite(mean_wait):
        return math.inf
    tail = 1 - percentile / 100
    rho = min(utilization, 0.999999)
    if tail >= rho:
        return 0.0
    return mean_wait / rho * math.log(rho / tail)


def poisson_count_quantile(mean: float, dispersion: float, percentile: int) -> float:
    """Normal approximation of a count with this mean and variance mean·dispersion (burstier arrivals: > 1)."""
    if mean <= 0:
        return 0.0
    return max(0.0, mean + _Z[percentile] * math.sqrt(mean * max(dispersion, 0.0)))


def _wait_tail(first: tuple[float, float], second: tuple[float, float]) -> Callable[[float], float]:
    """y ↦ P(W₁ + W₂ > y) for independent waits, each 0 with probability 1 − P and exponential(m) otherwise.

    `first` and `second` are (probability of waiting, mean wait of those who wait). Specialised once per
    call of `latency_quantiles`, evaluated many times.
    """
    waits = [(p, m) for p, m in (first, second) if p > 0 and m > 0]
    if not waits:
        return lambda y: 1.0 if y < 0 else 0.0
    if len(waits) == 1:
        ((p, m),) = waits
        return lambda y: 1.0 if y < 0 else p * math.exp(-y / m)
    (p1, m1), (p2, m2) = waits
    only1, only2, both = p1 * (1.0 - p2), p2 * (1.0 - p1), p1 * p2
    if abs(m1 - m2) <= 1e-9 * max(m1, m2):
        # Sum of two equal exponentials: the Erlang-2 tail.
        def equal(y: float) -> float:
            if y < 0:
                return 1.0
            e = math.exp(-y / m1)
            return (only1 + only2) * e + both * (1.0 + y / m1) * e

        return equal

    def unequal(y: float) -> float:
        if y < 0:
            return 1.0
        e1, e2 = math.exp(-y / m1), math.exp(-y / m2)
        # Sum of two exponentials of different means (hypoexponential).
        return only1 * e1 + only2 * e2 + both * (m1 * e1 - m2 * e2) / (m1 - m2)

    return unequal


def latency_quantile(
    constant_s: float,
    first_wait: tuple[float, float],
    second_wait: tuple[float, float],
    own: Sequence[tuple[float, float]],
    percentile: int,
) -> float:
    """Quantile of constant + W₁ + W₂ + X with X (a request's own prefill) given as (probability, seconds) atoms.

    The quantile of the sum, not the sum of the quantiles: a request that waits behind a long prompt is
    rarely a long prompt itself. Waits are (probability of waiting, conditional mean), as `waiting_quantile`
    has them; the atoms should sit at the top of their probability bins so that the answer stays an upper
    bound. Solved for P(total > t) = 1 − percentile/100 by bisection, to 0.01 % (on the high side).
    """
    return latency_quantiles(constant_s, first_wait, second_wait, own, (percentile,))[0]


def latency_quantiles(
    constant_s: float,
    first_wait: tuple[float, float],
    second_wait: tuple[float, float],
    own: Sequence[tuple[float, float]],
    percentiles: Sequence[int],
) -> list[float]:
    """`latency_quantile` at several percentiles (ascending), sharing the work: each starts where the last ended."""
    if any(p > 0 and not math.isfinite(m) for p, m in (first_wait, second_wait)):
        return [math.inf for _ in percentiles]
    merged: dict[float, float] = {}
    for weight, x in own:  # prompts at the maximum length often fill several bins: one atom each value
        merged[x] = merged.get(x, 0.0) + weight
    atoms = [(weight, constant_s + x) for x, weight in merged.items()]
    wait_tail = _wait_tail(first_wait, second_wait)

    def exceeds(t: float) -> float:
        return sum(weight * wait_tail(t - start) for weight, start in atoms)

    means = [m for p, m in (first_wait, second_wait) if p > 0 and m > 0]
    reach = max((x for _, x in own), default=0.0) + sum(means) * 2.0
    out = []
    low = constant_s
    for percentile in percentiles:
        tail = 1.0 - percentile / 100.0
        high = constant_s + reach + sum(means) * math.log(1.0 / tail)
        while exceeds(high) > tail:
            high = constant_s + 2.0 * (high - constant_s) + 1e-6
        # P(total > t) falls monotonically in t (with jumps at the atoms): bisection, to 0.01 %.
        for _ in range(_QUANTILE_ITERATIONS):
            if high - low <= _QUANTILE_TOLERANCE * max(high, 1e-3):
                break
            middle = 0.5 * (low + high)
            if exceeds(middle) > tail:
                low = middle
            else:
                high = middle
        out.append(high)
        low = min(low, high)
    return out


_QUANTILE_ITERATIONS = 60
_QUANTILE_TOLERANCE = 1e-4
