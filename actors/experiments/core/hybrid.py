"""The hybrid histogram keep-alive policy of "Serverless in the Wild" (Shahrad et al., ATC'20),
with the defaults of dslab-faas's reference implementation (`extra/hybrid_histogram.rs`).

One core, `IdleHistogram`, learns the app's idle times (from the moment the app has no
request running to its next arrival) in `bin_s` bins up to `range_s`; longer ones are
out of bounds (OOB). For each idle period it gives a `Window` (pre-warm, keep-alive):

- OOB share >= `oob_threshold`: the paper forecasts the next idle time with ARIMA. Here the
  forecast is the last OOB idle time (the forecast of an ARIMA(0,1,0), a random walk):
  pre-warm = f x (1 - arima_margin), loaded until f x (1 + arima_margin) (dslab: the same
  pre-warm and a window of 2 x margin x f), arima_margin 0.15 as dslab;
- not representative (fewer than `min_samples` in-range idle times, or the coefficient of
  variation of the bin counts < `cv_threshold`): the standard keep-alive, `range_s`, no
  pre-warm;
- else: pre-warm = head bin x bin_s x (1 - margin), and the app is unloaded at
  (tail bin + 1) x bin_s x (1 + margin) after its idle start, so the keep-alive window
  (counted from the pre-warm load, as in the paper) is that minus the pre-warm. dslab
  counts its keep-alive (tail + 1) x bin_s x (1 + margin) from the pre-warm load instead,
  keeping an instance up to the pre-warm longer. A head bin of 0 means no pre-warm: the
  instance stays loaded from its idle start until that end.

Percentiles are dslab's: the first bin whose cumulative count reaches pct % of the
in-range count. The CV uses the sample standard deviation over all bins, as dslab.
`min_samples` (default 5) is ours: dslab and the paper call a single idle time
representative (the CV of one sample in 240 bins is 15.5). The histogram is bounded:
range_s / bin_s counts, the OOB count and the last OOB idle time.

Two faces: `HybridKeepAlive` for the per-request mode (faas.py) and `HybridHistogramPolicy`,
a `SimPolicy` for the fluid simulator (simulator.py).
"""

from __future__ import annotations

import bisect
import enum
import itertools
import math

from actors.experiments.core.faas import Window
from actors.experiments.core.state import SimState


class Pattern(enum.Enum):
    UNCERTAIN = "uncertain"  # not representative: standard keep-alive
    CERTAIN = "certain"  # histogram windows
    OUT_OF_BOUNDS = "out_of_bounds"  # the forecast fallback


class IdleHistogram:
    def __init__(
        self,
        *,
        range_s: float = 14_400.0,
        bin_s: float = 60.0,
        head_pct: float = 5.0,
        tail_pct: float = 99.0,
        margin: float = 0.10,
        cv_threshold: float = 2.0,
        oob_threshold: float = 0.5,
        arima_margin: float = 0.15,
        min_samples: int = 5,
    ) -> None:
        if not (range_s > 0 and bin_s > 0 and range_s >= 2 * bin_s):
            raise ValueError("range_s and bin_s must be positive, with at least two bins")
        if not 0 < head_pct <= tail_pct <= 100:
            raise ValueError("percentiles must satisfy 0 < head_pct <= tail_pct <= 100")
        if not (0 <= margin < 1 and 0 <= arima_margin < 1):
            raise ValueError("margins must be in [0, 1)")
        self.range_s = float(range_s)
        self.bin_s = float(bin_s)
        self.head = head_pct / 100.0
        self.tail = tail_pct / 100.0
        self.margin = margin
        self.cv_threshold = cv_threshold
        self.oob_threshold = oob_threshold
        self.arima_margin = arima_margin
        self.min_samples = min_samples
        self.bins = [0] * round(range_s / bin_s)
        self.in_range = 0
        self.sum_sq = 0  # sum of squared bin counts, for the CV
        self.oob = 0
        self.last_oob_s = 0.0
        self._cached: Window | None = None

    def record(self, idle_s: float) -> None:
        idle_s = max(0.0, idle_s)
        b = int(idle_s // self.bin_s)
        if b < len(self.bins):
            c = self.bins[b]
            self.bins[b] = c + 1
            self.sum_sq += 2 * c + 1
            self.in_range += 1
        else:
            self.oob += 1
            self.last_oob_s = idle_s
        self._cached = None

    @property
    def oob_share(self) -> float:
        total = self.oob + self.in_range
        return self.oob / total if total else 0.0

    @property
    def cv(self) -> float:
        n = len(self.bins)
        if self.in_range == 0:
            return 0.0
        mean = self.in_range / n
        var = max(0.0, (self.sum_sq - n * mean * mean) / (n - 1))
        return math.sqrt(var) / mean

    @property
    def pattern(self) -> Pattern:
        if self.oob and self.oob_share >= self.oob_threshold:
            return Pattern.OUT_OF_BOUNDS
        if self.in_range < self.min_samples or self.cv < self.cv_threshold:
            return Pattern.UNCERTAIN
        return Pattern.CERTAIN

    def percentile_bins(self, *fractions: float) -> list[int]:
        """For each fraction, the first bin whose cumulative count reaches it."""
        cumulative = list(itertools.accumulate(self.bins))
        last = len(self.bins) - 1
        return [min(bisect.bisect_left(cumulative, f * self.in_range), last) for f in fractions]

    def window(self) -> Window:
        """The (pre-warm, keep-alive) windows for an idle period starting now."""
        if self._cached is None:
            self._cached = self._window()
        return self._cached

    def _window(self) -> Window:
        pattern = self.pattern
        if pattern is Pattern.UNCERTAIN:
            return Window(0.0, self.range_s)
        if pattern is Pattern.OUT_OF_BOUNDS:
            f = self.last_oob_s
            return Window(f * (1 - self.arima_margin), 2 * self.arima_margin * f)
        head, tail = self.percentile_bins(self.head, self.tail)
        prewarm = head * self.bin_s * (1 - self.margin)
        end = (tail + 1) * self.bin_s * (1 + self.margin)
        return Window(prewarm, end - prewarm)


class HybridKeepAlive:
    """The per-request face: the app is all the function's instances. An arrival after an
    idle period records it; when the last running request ends, the histogram's window
    applies (a pre-warm unloads every idle instance); an instance going idle while others
    still run is kept until the window's end (pre-warm + keep-alive) from now."""

    def __init__(self, histogram: IdleHistogram | None = None) -> None:
        self.histogram = histogram if histogram is not None else IdleHistogram()
        self._busy: tuple[Window, Window] | None = None  # (app window, its busy-time form)

    def on_arrival(self, now: float, idle_since: float | None) -> None:
        if idle_since is not None:
            self.histogram.record(now - idle_since)

    def on_idle(self, now: float, running: int) -> Window:
        window = self.histogram.window()
        if running == 0:
            return window
        if self._busy is None or self._busy[0] is not window:
            self._busy = (window, Window(0.0, window.prewarm_s + window.keep_alive_s))
        return self._busy[1]


class HybridHistogramPolicy:
    """The fluid-simulator face. With demand: up to ceil(demand / per_alloc_rps) (1 when
    per_alloc_rps is None), never down, as `KeepAlivePolicy`. The first evaluation with
    demand after an idle period records its length (from the state's `last_busy_s`; an idle
    gap no evaluation saw is not recorded). Idle: the window taken at the period's first
    idle evaluation rules it: 0 until the pre-warm, then 1 until the keep-alive ends, then
    0; without pre-warm the count is kept until the keep-alive ends."""

    wakes_on_demand = True

    def __init__(
        self,
        *,
        range_s: float = 14_400.0,
        bin_s: float = 60.0,
        head_pct: float = 5.0,
        tail_pct: float = 99.0,
        margin: float = 0.10,
        cv_threshold: float = 2.0,
        oob_threshold: float = 0.5,
        per_alloc_rps: float | None = None,
        max: int = 1_000_000,
        interval_s: float = 10.0,
        arima_margin: float = 0.15,
        min_samples: int = 5,
    ) -> None:
        self.histogram = IdleHistogram(
            range_s=range_s,
            bin_s=bin_s,
            head_pct=head_pct,
            tail_pct=tail_pct,
            margin=margin,
            cv_threshold=cv_threshold,
            oob_threshold=oob_threshold,
            arima_margin=arima_margin,
            min_samples=min_samples,
        )
        if per_alloc_rps is not None and not per_alloc_rps > 0:
            raise ValueError("per_alloc_rps must be positive")
        if max < 1 or not interval_s > 0:
            raise ValueError("max must be at least 1 and interval_s positive")
        self.per_alloc_rps = per_alloc_rps
        self.max = max
        self.interval_s = interval_s
        self.idle_from: float | None = None  # the idle start the current window is for
        self.window: Window | None = None

    def decide(self, now: float, state: SimState) -> int | None:
        if state.demand_rps > 0:
            if self.idle_from is not None:
                self.histogram.record(now - self.idle_from)
                self.idle_from, self.window = None, None
            need = 1
            if self.per_alloc_rps is not None:
                need = math.ceil(state.demand_rps / self.per_alloc_rps)
            need = min(self.max, need)
            return need if need > state.count else None
        if state.last_busy_s is None:
            return None
        if self.idle_from != state.last_busy_s or self.window is None:
            self.idle_from = state.last_busy_s
            self.window = self.histogram.window()
        w = self.window
        elapsed = now - self.idle_from
        if elapsed >= w.prewarm_s + w.keep_alive_s:
            target = 0
        elif w.prewarm_s == 0:
            return None
        else:
            target = 0 if elapsed < w.prewarm_s else 1
        return target if target != state.count else None
