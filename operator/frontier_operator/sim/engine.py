"""One simulated SGLang server: continuous batching with a waiting queue, the batch cap and the KV limit.

The engine follows SGLang's scheduler loop (`Scheduler.get_next_batch_to_run`, 0.5.23): after every
iteration it admits waiting requests in FCFS order while the running batch is below `--max-running-requests`
and their KV fits, then runs a prefill batch if one can be formed — prefill first, decode paused, a long
prompt split into chunks of `--chunked-prefill-size` tokens — and a decode step of every running request
otherwise. A prefill produces the request's first token.

To be fast, consecutive decode steps with an unchanged batch are simulated as one *macro step* of `k`
steps that ends when the next running request finishes; an arrival, or (load-indexed truths) a request
reaching its first token, cuts the macro step at the next step boundary. A running request's progress is
kept as the difference of one per-engine counter of generated tokens (`generated_clock`), so a macro step
costs O(log n) whatever the batch.

Roles: a unified engine prefills and decodes; a P/D prefill engine hands every prefilled request back to the
fleet (which moves its KV to a decode engine), and a decode engine only decodes, its first step emitting the
request's first token to the client.

The engine is deterministic given its `random.Random` and performs no I/O; the fleet drives it.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Protocol

from frontier_operator.perf.types import Role
from frontier_operator.sim.timing import PrefillMode, ReplicaTiming

_EPS = 1e-9


@dataclass(slots=True, eq=False)
class SimRequest:
    """One request's life; times are simulated seconds, NaN until reached."""

    rid: int
    arrival: float
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    revision: int = -1
    prefill_pod: int = -1
    decode_pod: int = -1
    prefill_left: int = 0
    prefix_done: int = 0
    reserved: int = 0
    prefill_done: float = math.nan
    first_token: float = math.nan
    finish: float = math.nan
    transfer_s: float = 0.0
    generated_at_join: float = 0.0
    clock_at_join: float = 0.0
    awaiting_first: bool = False


class EngineSink(Protocol):
    """What the fleet hears from an engine (it records metrics and moves P/D requests on)."""

    def on_first_token(self, engine: Engine, request: SimRequest, at: float) -> None: ...

    def on_prefill_done(self, engine: Engine, request: SimRequest, at: float) -> None: ...

    def on_finish(self, engine: Engine, request: SimRequest, at: float) -> None: ...

    def on_decode(
        self,
        engine: Engine,
        at: float,
        *,
        running: int,
        steps: int,
        accept: float,
        step_s: float,
        stalls: tuple[tuple[int, float], ...],
    ) -> None:
        """`steps` decode steps of `running` requests ended at `at`; `stalls` are (requests, seconds) of
        prefill the first step waited for: requests that joined during the prefill waited only for its rest."""
        ...

    def on_prefill(self, engine: Engine, at: float, new_tokens: int, cached_tokens: int) -> None: ...


class Phase(IntEnum):
    IDLE = 0
    PREFILL = 1
    DECODE = 2
    WAIT = 3  # load-indexed: nothing to decode, waiting for a request to reach its first token


@dataclass(eq=False)
class Engine:
    index: int
    role: Role
    timing: ReplicaTiming
    rng: random.Random
    sink: EngineSink
    # Requests in flight this engine's load-indexed timing is looked up at (the fleet decides the scope).
    load: Callable[[Engine], float]
    next_time: float = math.inf
    version: int = 0
    admitted: int = 0
    kv_reserved: int = 0
    generated_clock: float = 0.0
    waiting: deque[SimRequest] = field(default_factory=deque)
    prefilling: deque[SimRequest] = field(default_factory=deque)
    decoding: dict[int, SimRequest] = field(default_factory=dict)
    # Load-indexed truths: (first-token time, rid, request) of admitted requests still before their first token.
    pending_first: list[tuple[float, int, SimRequest]] = field(default_factory=list)
    last_cache_hit_rate: float | None = None
    last_accept: float | None = None
    _finish_heap: list[tuple[float, int]] = field(default_factory=list)
    _context_base: float = 0.0
    _phase: Phase = Phase.IDLE
    _t0: float = 0.0
    _step_s: float = 0.0
    _steps: int = 0
    _accept: float = 1.0
    # Prefill time since the last decode step, and (requests, stall so far) for requests that joined meanwhile.
    _stall_s: float = 0.0
    _joined_during_stall: list[tuple[int, float]] = field(default_factory=list)
    _iteration_stalls: tuple[tuple[int, float], ...] = ()
    # P/D decode: requests whose first decode step will emit their first token.
    _awaiting: list[SimRequest] = field(default_factory=list)
    _chunk: list[tuple[SimRequest, int]] = field(default_factory=list)

    # ------------------------------------------------------------------ state the exporter and observer read

    @property
    def running(self) -> int:
        """SGLang's `num_running_reqs`: the decode batch, or the requests of the prefill batch being run."""
        return len(self.decoding) + len(self.pending_first) + len(self._chunk)

    @property
    def queued(self) -> int:
        """SGLang's `num_queue_reqs`: waiting, including admitted requests whose prefill has not run yet."""
        return len(self.waiting) + len(self.prefilling) - len(self._chunk)

    @property
    def in_flight(self) -> int:
        return self.admitted + len(self.waiting)

    @property
    def busy(self) -> bool:
        return self.in_flight > 0

    def kv_used_tokens(self) -> float:
        used = float(sum(r.prefix_done for r in self.prefilling))
        if self.decoding:
            used += self._context_base + len(self.decoding) * self.generated_clock
        used += sum(r.input_tokens for _, _, r in self.pending_first)
        return used

    def kv_usage(self) -> float | None:
        capacity = self.timing.kv_capacity_tokens
        if not capacity:
            return None
        return min(1.0, self.kv_used_tokens() / capacity)

    # ------------------------------------------------------------------------------------------- driving

    def submit(self, request: SimRequest, now: float) -> None:
        """A request arrives (from the router, or from a prefill engine after its KV transfer)."""
        self.waiting.append(request)
        if self._phase in (Phase.IDLE, Phase.WAIT):
            self._schedule(now)
        elif self.timing.prefill_mode is PrefillMode.LOAD_INDEXED and self.role is not Role.DECODE:
            # Load-indexed prefill runs beside decode: admit now, rejoin the batch at the first token.
            self._admit(now)
            if self.pending_first:
                self._cut_at(self.pending_first[0][0])
        else:
            # The running batch changes only between iterations: admit at the next step boundary.
            self._cut_at(now)

    def fire(self, now: float) -> None:
        """The current iteration ends at `now` (== `next_time`)."""
        if self._phase is Phase.PREFILL:
            self._end_prefill(now)
        elif self._phase is Phase.DECODE:
            self._end_decode(now)
        self._reach_first_tokens(now)
        self._schedule(now)

    # ----------------------------------------------------------------------------------------- admission

    def _reservation(self, request: SimRequest) -> int:
        if self.role is Role.PREFILL:
            return request.input_tokens
        return request.input_tokens + request.output_tokens

    def _admit(self, now: float) -> None:
        capacity = self.timing.kv_capacity_tokens
        cap = self.timing.batch_cap
        while self.waiting and self.admitted < cap:
            request = self.waiting[0]
            need = self._reservation(request)
            # A request larger than the whole pool would block the queue forever; SGLang would reject it, the
            # twin serves it alone rather than deadlock.
            if capacity is not None and self.kv_reserved + need > capacity and self.admitted > 0:
                break
            self.waiting.popleft()
            self.admitted += 1
            self.kv_reserved += need
            request.reserved = need
            self._start(request, now)

    def _start(self, request: SimRequest, now: float) -> None:
        if self.role is Role.DECODE:
            if request.output_tokens <= 1:
                # The prefill engine produced the only token: the request ends as its KV arrives.
                self._release(request)
                request.first_token = request.finish = now
                self.sink.on_first_token(self, request, now)
                self.sink.on_finish(self, request, now)
                return
            request.awaiting_first = True
            self._awaiting.append(request)
            self._join(request, 1.0)
            return
        new_tokens = request.input_tokens - request.cached_tokens
        if self.timing.prefill_mode is PrefillMode.LOAD_INDEXED:
            delay = self.timing.prefill_s(new_tokens, request.cached_tokens, self.load(self))
            delay *= _lognormal(self.rng, self.timing.first_token_cv)
            heapq.heappush(self.pending_first, (now + delay, request.rid, request))
            self.sink.on_prefill(self, now, new_tokens, request.cached_tokens)
            return
        request.prefill_left = new_tokens
        request.prefix_done = request.cached_tokens
        self.prefilling.append(request)

    def _release(self, request: SimRequest) -> None:
        self.admitted -= 1
        self.kv_reserved -= request.reserved
        request.reserved = 0

    # ---------------------------------------------------------------------------------------- scheduling

    def _schedule(self, now: float) -> None:
        self._admit(now)
        timing = self.timing
        if timing.prefill_mode is PrefillMode.SHARED_GPU and self.prefilling:
            self._plan_prefill(now)
        elif self.decoding:
            self._plan_decode(now)
        elif self.pending_first:
            self._phase = Phase.WAIT
            self._set_next(self.pending_first[0][0])
        else:
            self._phase = Phase.IDLE
            self._set_next(math.inf)

    def _set_next(self, when: float) -> None:
        self.next_time = when
        self.version += 1

    def _plan_prefill(self, now: float) -> None:
        # With attention DP every rank has its own chunk (SGLang divides --chunked-prefill-size by the ranks) and
        # its own requests, and the ranks prefill in the same forward. Requests are dealt to ranks in FCFS order
        # as each forward is formed (a balanced dispatcher); a prompt stays on one rank, chunk after chunk.
        ranks = self.timing.attention_ranks
        per_rank = max(1, self.timing.chunk_tokens // ranks)
        chunk: list[tuple[SimRequest, int]] = []
        rank_tokens = [0]
        rank_sequences = [0]
        weighted_prefix = 0.0
        for request in self.prefilling:
            if rank_tokens[-1] >= per_rank:
                if len(rank_tokens) == ranks:
                    break
                rank_tokens.append(0)
                rank_sequences.append(0)
            take = min(request.prefill_left, per_rank - rank_tokens[-1])
            chunk.append((request, take))
            rank_tokens[-1] += take
            rank_sequences[-1] += 1
            weighted_prefix += take * request.prefix_done
        tokens = sum(rank_tokens)
        prefix = weighted_prefix / tokens if tokens else 0.0
        # The ranks meet in every MoE layer: the forward lasts as long as the busiest rank's share, whose prompts
        # each attend to their own tokens.
        busiest = max(range(len(rank_tokens)), key=rank_tokens.__getitem__)
        seconds = self.timing.prefill_s(
            rank_tokens[busiest], prefix, self.load(self), len(rank_tokens), rank_sequences[busiest]
        )
        duration = seconds * _lognormal(self.rng, self.timing.noise_cv)
        self._chunk = chunk
        self._phase = Phase.PREFILL
        self._t0 = now
        self._step_s = duration
        self._set_next(now + duration)

    def _plan_decode(self, now: float) -> None:
        running = len(self.decoding)
        accept = self.timing.accept_length
        if self.timing.speculative:
            accept = max(1.0, accept * _lognormal(self.rng, 0.05))
        earliest = self._finish_heap[0][0]
        steps = max(1, math.ceil((earliest - self.generated_clock) / accept - _EPS))
        context = self._context_base / running + self.generated_clock + steps * accept / 2.0
        step_s = self.timing.decode_step_s(running, context, self.load(self))
        step_s *= _lognormal(self.rng, self.timing.noise_cv)
        if self.pending_first:
            until_first = self.pending_first[0][0] - now
            steps = max(1, min(steps, math.ceil(until_first / step_s - _EPS)))
        self._phase = Phase.DECODE
        self._t0 = now
        self._step_s = step_s
        self._steps = steps
        self._accept = accept
        # A P/D request's first decode step emits its first token, not an inter-token gap.
        self._iteration_stalls = self._stalls(running - len(self._awaiting))
        self._stall_s = 0.0
        self._joined_during_stall.clear()
        for request in self._awaiting:
            request.awaiting_first = False
            at = now + step_s + self.timing.first_token_overhead_s
            request.first_token = at
            self.sink.on_first_token(self, request, at)
        self._awaiting.clear()
        self._set_next(now + steps * step_s)

    def _cut_at(self, when: float) -> None:
        """End the current decode macro step at the first step boundary at or after `when`."""
        if self._phase is not Phase.DECODE or when >= self.next_time:
            return
        done = max(1, math.ceil((when - self._t0) / self._step_s - _EPS))
        if done < self._steps:
            self._steps = done
            self._set_next(self._t0 + done * self._step_s)

    # ---------------------------------------------------------------------------------- iteration ends

    def _end_prefill(self, now: float) -> None:
        self._stall_s += self._step_s
        new_tokens = 0
        cached_tokens = 0
        for request, take in self._chunk:
            if request.prefix_done == request.cached_tokens:
                cached_tokens += request.cached_tokens
            new_tokens += take
            request.prefill_left -= take
            request.prefix_done += take
        self.sink.on_prefill(self, now, new_tokens, cached_tokens)
        self._chunk = []
        while self.prefilling and self.prefilling[0].prefill_left <= 0:
            self._prefilled(self.prefilling.popleft(), now)

    def _prefilled(self, request: SimRequest, now: float) -> None:
        request.prefill_done = now
        if self.role is Role.PREFILL:
            self._release(request)
            self.sink.on_prefill_done(self, request, now)
            return
        at = now + self.timing.first_token_overhead_s
        request.first_token = at
        self.sink.on_first_token(self, request, at)
        if request.output_tokens <= 1:
            self._release(request)
            request.finish = at
            self.sink.on_finish(self, request, at)
            return
        self._join(request, 1.0)

    def _stalls(self, running: int) -> tuple[tuple[int, float], ...]:
        if self._stall_s <= 0:
            return ((running, 0.0),) if running > 0 else ()
        fresh = sum(count for count, _ in self._joined_during_stall)
        groups = [(count, self._stall_s - at) for count, at in self._joined_during_stall]
        if running > fresh:
            groups.append((running - fresh, self._stall_s))
        return tuple(groups)

    def _join(self, request: SimRequest, generated: float) -> None:
        if self._stall_s > 0:
            self._joined_during_stall.append((1, self._stall_s))
        request.generated_at_join = generated
        request.clock_at_join = self.generated_clock
        self._context_base += request.input_tokens + generated - self.generated_clock
        self.decoding[request.rid] = request
        finish_at = self.generated_clock + (request.output_tokens - generated)
        heapq.heappush(self._finish_heap, (finish_at, request.rid))

    def _end_decode(self, now: float) -> None:
        steps, accept, step_s = self._steps, self._accept, self._step_s
        running = len(self.decoding)
        self.generated_clock += steps * accept
        self.last_accept = accept
        self.sink.on_decode(
            self, now, running=running, steps=steps, accept=accept, step_s=step_s, stalls=self._iteration_stalls
        )
        self._iteration_stalls = ()
        heap = self._finish_heap
        while heap and heap[0][0] <= self.generated_clock + _EPS:
            _, rid = heapq.heappop(heap)
            request = self.decoding.pop(rid)
            self._context_base -= request.input_tokens + request.generated_at_join - request.clock_at_join
            self._release(request)
            request.finish = now
            self.sink.on_finish(self, request, now)
        if not self.decoding:
            self._context_base = 0.0

    def _reach_first_tokens(self, now: float) -> None:
        while self.pending_first and self.pending_first[0][0] <= now + _EPS:
            at, _, request = heapq.heappop(self.pending_first)
            request.prefill_done = at
            if self.role is Role.PREFILL:
                self._release(request)
                self.sink.on_prefill_done(self, request, at)
                continue
            request.first_token = at
            self.sink.on_first_token(self, request, at)
            if request.output_tokens <= 1:
                self._release(request)
                request.finish = at
                self.sink.on_finish(self, request, at)
                continue
            self._join(request, 1.0)


def _lognormal(rng: random.Random, cv: float) -> float:
    """A mean-one multiplicative jitter with coefficient of variation ≈ `cv`."""
    if cv <= 0:
        return 1.0
    sigma2 = math.log(1.0 + cv * cv)
    return math.exp(rng.gauss(-sigma2 / 2.0, math.sqrt(sigma2)))
