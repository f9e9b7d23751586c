"""Scale-per-request (FaaS) mode: a discrete-event run of one function's instances, request
by request, as FaaS platforms and SimFaaS (Mahmoudi & Khazaei) model them.

- An instance serves one request at a time. A request takes an idle instance if there is
  one: the newest (the latest created), as SimFaaS's `schedule_warm_instance` does, so the
  oldest instances idle longest and expire first; else a new instance starts and serves it
  with the cold service time (a cold start).
- Requests arriving while `max_concurrency` requests run are rejected; they still count as
  requests, so P(cold) = cold starts / requests, as SimFaaS.
- When an instance goes idle, the keep-alive policy answers a `Window`: with no pre-warm the
  instance is kept idle `keep_alive_s` and then expires; with a pre-warm the app's idle
  instances are unloaded at once and one instance is loaded again `prewarm_s` later, kept
  idle `keep_alive_s` after that (Serverless in the Wild's windows). A request arriving
  before a pending pre-warm cancels it.
- Ties: departures, expiries and pre-warms at a time go before an arrival at that time
  (SimFaaS: an arrival goes first only if strictly earlier), so a request arriving exactly
  when the keep-alive ends finds the instance gone.

Events up to `until_s` included run; time-weighted means are over [0, until_s]; the mean
lifespan is over instances gone by `until_s` (SimFaaS's `prev_servers`). Same inputs and
seed, same run.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

MAX_TRAJECTORY = 100_000
_DEPART, _EXPIRE, _PREWARM = 0, 1, 2
_RUNNING, _IDLE, _GONE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Window:
    """What to do with an instance that just went idle: with `prewarm_s` 0, keep it idle
    `keep_alive_s`; else unload the app's idle instances now, load one `prewarm_s` later
    and keep that one idle `keep_alive_s`. `math.inf` keeps an instance for ever."""

    prewarm_s: float
    keep_alive_s: float

    def __post_init__(self) -> None:
        if self.prewarm_s < 0 or self.keep_alive_s < 0:
            raise ValueError("windows cannot be negative")


class KeepAlive(Protocol):
    """A keep-alive policy: told of each arrival, asked at each instance's idle start."""

    def on_arrival(self, now: float, idle_since: float | None) -> None:
        """A request arrives; `idle_since` is when the app last had no request running,
        None while a request runs (or before the first)."""
        ...

    def on_idle(self, now: float, running: int) -> Window:
        """An instance finished its request at `now`; `running` requests still run."""
        ...


@dataclass(frozen=True, slots=True)
class FixedKeepAlive:
    """The fixed keep-alive of AWS (600 s), Azure (1,200 s), SimFaaS's expiration threshold."""

    keep_alive_s: float = 600.0
    _window: Window = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_window", Window(0.0, self.keep_alive_s))

    def on_arrival(self, now: float, idle_since: float | None) -> None:
        return None

    def on_idle(self, now: float, running: int) -> Window:
        return self._window


@dataclass(frozen=True, slots=True)
class Poisson:
    """Arrivals of a Poisson process of `rate_per_s`, drawn with the run's seeded RNG."""

    rate_per_s: float

    def __post_init__(self) -> None:
        if not self.rate_per_s > 0:
            raise ValueError("the arrival rate must be positive")


@dataclass(frozen=True, slots=True)
class ExpService:
    """Exponential service times, warm and cold means (SimFaaS's service processes)."""

    warm_mean_s: float
    cold_mean_s: float

    def __post_init__(self) -> None:
        if not (self.warm_mean_s > 0 and self.cold_mean_s > 0):
            raise ValueError("service means must be positive")


@dataclass(frozen=True, slots=True)
class TraceService:
    """Per-request durations (a trace's execution times, in arrival order); a cold start
    adds a penalty: `cold_penalty_s`, or one of `penalty_samples` drawn per request before
    the run, so that a request gets the same penalty under every policy of one seed."""

    durations: Sequence[float]
    cold_penalty_s: float = 0.0
    penalty_samples: Sequence[float] = ()

    def __post_init__(self) -> None:
        if self.cold_penalty_s < 0 or any(s < 0 for s in self.penalty_samples):
            raise ValueError("cold-start penalties cannot be negative")


@dataclass(frozen=True, slots=True)
class FaasResult:
    until_s: float
    requests: int  # arrivals, rejected ones included
    cold_starts: int
    rejections: int
    prewarms: int  # instances loaded by a pre-warm
    instances_created: int  # cold starts + pre-warms
    mean_instances: float  # time-weighted over [0, until_s]
    mean_running: float
    mean_idle: float
    mean_lifespan_s: float | None  # over instances gone before until_s; None if none
    idle_instance_s: float  # instance-seconds idle: the wasted memory-time per MB
    memory_mb: float | None
    trajectory_step_s: float
    trajectory: tuple[float, ...]  # mean instance count over each step from 0

    @property
    def p_cold(self) -> float:
        return self.cold_starts / self.requests if self.requests else 0.0

    @property
    def p_reject(self) -> float:
        return self.rejections / self.requests if self.requests else 0.0

    @property
    def idle_mb_s(self) -> float | None:
        return None if self.memory_mb is None else self.idle_instance_s * self.memory_mb

    @property
    def idle_gb_s(self) -> float | None:
        mb_s = self.idle_mb_s
        return None if mb_s is None else mb_s / 1024.0


def _check(
    arrivals: Poisson | Sequence[float],
    service: ExpService | TraceService,
    until_s: float | None,
    max_concurrency: int | None,
) -> float:
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError("max_concurrency must be at least 1")
    if isinstance(arrivals, Poisson):
        if until_s is None:
            raise ValueError("a Poisson run needs until_s")
        if isinstance(service, TraceService):
            raise ValueError("trace durations need the trace's arrivals, not a Poisson process")
    else:
        if any(b < a for a, b in itertools.pairwise(arrivals)):
            raise ValueError("arrival times must be sorted")
        if isinstance(service, TraceService) and len(service.durations) < len(arrivals):
            raise ValueError("fewer durations than arrivals")
        if until_s is None:
            until_s = float(arrivals[-1]) if len(arrivals) else 0.0
    if not until_s > 0:
        raise ValueError("until_s must be positive")
    return float(until_s)


def simulate_faas(
    arrivals: Poisson | Sequence[float],
    service: ExpService | TraceService,
    keep_alive: KeepAlive | float = 600.0,
    *,
    until_s: float | None = None,
    max_concurrency: int | None = None,
    memory_mb: float | None = None,
    seed: int = 0,
    trajectory_step_s: float | None = None,
) -> FaasResult:
    """Run requests from 0 to `until_s` (a given sequence: by default its last arrival).
    `keep_alive` is a policy or a fixed keep-alive in seconds. The trajectory holds the mean
    instance count of each `trajectory_step_s` (default: until_s / 1000)."""
    until = _check(arrivals, service, until_s, max_concurrency)
    policy: KeepAlive = (
        FixedKeepAlive(float(keep_alive)) if isinstance(keep_alive, int | float) else keep_alive
    )
    step = until / 1000.0 if trajectory_step_s is None else float(trajectory_step_s)
    if not step > 0 or until / step > MAX_TRAJECTORY:
        raise ValueError(f"trajectory_step_s must give at most {MAX_TRAJECTORY} points")
    rng = random.Random(seed)
    expovariate = rng.expovariate
    heappush, heappop = heapq.heappush, heapq.heappop
    inf = math.inf

    # Arrivals and service times.
    poisson_rate = arrivals.rate_per_s if isinstance(arrivals, Poisson) else 0.0
    given: Sequence[float] = () if isinstance(arrivals, Poisson) else arrivals
    n_given = len(given)
    warm_rate = cold_rate = 0.0
    durations: Sequence[float] = ()
    penalties: list[float] | None = None
    penalty = 0.0
    if isinstance(service, ExpService):
        warm_rate, cold_rate = 1.0 / service.warm_mean_s, 1.0 / service.cold_mean_s
    else:
        durations = service.durations
        penalty = service.cold_penalty_s
        if service.penalty_samples:
            pool = list(service.penalty_samples)
            penalties = [rng.choice(pool) for _ in range(n_given)]
    trace = not warm_rate

    # Instances, by id in creation order (so the newest idle one is the highest id).
    state: list[int] = []
    created: list[float] = []
    expire_at: list[float] = []
    pending_at: list[float] = []  # the earliest expiry event in the heap, per instance
    idle_heap: list[int] = []  # -id of idle instances (and of some gone: skipped)
    events: list[tuple[float, int, int]] = []  # (time, kind, instance or pre-warm number)
    prewarm_gen = 0
    prewarm_keep = 0.0

    requests = cold = rejected = prewarms = 0
    n_inst = running = 0
    idle_since: float | None = None
    gone = 0
    lifespans = 0.0
    area_n = area_run = 0.0
    last_t = 0.0
    traj: list[float] = []
    bucket_end = step
    bucket_area = 0.0

    k = 0  # index of the next given arrival
    ta = expovariate(poisson_rate) if poisson_rate else (given[0] if n_given else inf)
    while True:
        if events and events[0][0] <= ta:
            t = events[0][0]
            is_event = True
        else:
            t = ta
            is_event = False
        if t > until:
            break
        if t > last_t:
            dt = t - last_t
            area_n += n_inst * dt
            area_run += running * dt
            if t < bucket_end:
                bucket_area += n_inst * dt
            else:
                bucket_area += n_inst * (bucket_end - last_t)
                traj.append(bucket_area / step)
                bucket_end = (len(traj) + 1) * step
                while t >= bucket_end:
                    traj.append(float(n_inst))
                    bucket_end = (len(traj) + 1) * step
                bucket_area = n_inst * (t - (bucket_end - step))
            last_t = t

        if is_event:
            _, kind, i = heappop(events)
            if kind == _DEPART:
                state[i] = _IDLE
                running -= 1
                if running == 0:
                    idle_since = t
                window = policy.on_idle(t, running)
                if window.prewarm_s > 0:
                    # Unload the app's idle instances; load one again after the pre-warm.
                    state[i] = _GONE
                    n_inst -= 1
                    gone += 1
                    lifespans += t - created[i]
                    for j in idle_heap:
                        if state[-j] == _IDLE:
                            state[-j] = _GONE
                            n_inst -= 1
                            gone += 1
                            lifespans += t - created[-j]
                    idle_heap.clear()
                    prewarm_gen += 1
                    prewarm_keep = window.keep_alive_s
                    heappush(events, (t + window.prewarm_s, _PREWARM, prewarm_gen))
                    continue
                end = t + window.keep_alive_s
                expire_at[i] = end
                heappush(idle_heap, -i)
                if end < pending_at[i]:
                    pending_at[i] = end
                    heappush(events, (end, _EXPIRE, i))
            elif kind == _EXPIRE:
                if pending_at[i] == t:
                    pending_at[i] = inf
                if state[i] != _IDLE:
                    continue
                end = expire_at[i]
                if end <= t:
                    state[i] = _GONE
                    n_inst -= 1
                    gone += 1
                    lifespans += t - created[i]
                    if len(idle_heap) > 2 * n_inst + 64:  # drop the gone ones' entries
                        idle_heap = [j for j in idle_heap if state[-j] == _IDLE]
                        heapq.heapify(idle_heap)
                elif end < pending_at[i]:
                    pending_at[i] = end
                    heappush(events, (end, _EXPIRE, i))
            elif i == prewarm_gen:  # a pre-warm no arrival cancelled
                i = len(state)
                state.append(_IDLE)
                created.append(t)
                end = t + prewarm_keep
                expire_at.append(end)
                n_inst += 1
                prewarms += 1
                heappush(idle_heap, -i)
                if end < inf:
                    pending_at.append(end)
                    heappush(events, (end, _EXPIRE, i))
                else:
                    pending_at.append(inf)
            continue

        # An arrival at t.
        r = requests
        requests += 1
        if poisson_rate:
            ta = t + expovariate(poisson_rate)
        else:
            k += 1
            ta = given[k] if k < n_given else inf
        policy.on_arrival(t, idle_since if running == 0 else None)
        prewarm_gen += 1  # an arrival cancels a pending pre-warm
        if max_concurrency is not None and running >= max_concurrency:
            rejected += 1
            continue
        i = -1
        while idle_heap:
            j = -heappop(idle_heap)
            if state[j] == _IDLE:
                i = j
                break
        if i >= 0:
            state[i] = _RUNNING
            service_s = durations[r] if trace else expovariate(warm_rate)
        else:
            i = len(state)
            state.append(_RUNNING)
            created.append(t)
            expire_at.append(inf)
            pending_at.append(inf)
            n_inst += 1
            cold += 1
            if trace:
                service_s = durations[r] + (penalties[r] if penalties is not None else penalty)
            else:
                service_s = expovariate(cold_rate)
        running += 1
        heappush(events, (t + service_s, _DEPART, i))

    # Account up to until_s.
    dt = until - last_t
    area_n += n_inst * dt
    area_run += running * dt
    n_steps = max(1, math.ceil(until / step - 1e-9))
    while len(traj) < n_steps:
        start = bucket_end - step
        b_end = min(bucket_end, until)
        bucket_area += n_inst * (b_end - last_t)
        traj.append(bucket_area / (b_end - start) if b_end > start else float(n_inst))
        last_t = b_end
        bucket_area = 0.0
        bucket_end = (len(traj) + 1) * step

    return FaasResult(
        until_s=until,
        requests=requests,
        cold_starts=cold,
        rejections=rejected,
        prewarms=prewarms,
        instances_created=cold + prewarms,
        mean_instances=area_n / until,
        mean_running=area_run / until,
        mean_idle=(area_n - area_run) / until,
        mean_lifespan_s=lifespans / gone if gone else None,
        idle_instance_s=area_n - area_run,
        memory_mb=memory_mb,
        trajectory_step_s=step,
        trajectory=tuple(traj),
    )
