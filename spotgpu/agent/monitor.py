"""One monitor per notice source, each in its own thread, all feeding one queue.

A monitor's ``check()`` does one round against its source (a poll, or one
hanging GET) and returns the notices it saw. The runner owns the schedule and
the error policy: any failure is counted and retried, so a flaky metadata service
can delay a notice but never stop the agent. The first failure of a streak is retried
at once (a lone 500, reset or malformed body then costs one round trip, not a backoff);
further failures wait ``error_backoff`` each, so a broken service is not hammered.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from spotgpu.agent.events import InterruptionEvent, NoticeWithdrawn
from spotgpu.agent.http import MetadataError

log = logging.getLogger(__name__)


class Monitor(Protocol):
    #: e.g. "aws/spot-itn", "gcp/preempted", "azure/scheduledevents"
    source: str
    #: Seconds between polls; 0 for a hanging GET that blocks until change.
    interval: float
    #: Time of the last round that completed and found nothing.
    last_clean: float | None

    def check(self) -> Sequence[InterruptionEvent | NoticeWithdrawn]:
        """One round: the notices the source shows, and the ones it stopped showing."""
        ...


ErrorSink = Callable[[str, str], None]


class MonitorRunner(threading.Thread):
    """Runs one monitor at a fixed rate until stopped; never raises."""

    def __init__(
        self,
        monitor: Monitor,
        events: queue.Queue[InterruptionEvent | NoticeWithdrawn | None],
        stop: threading.Event,
        on_error: ErrorSink,
        on_clean: Callable[[str], None] | None = None,
        error_backoff: float = 1.0,
    ) -> None:
        super().__init__(name=f"monitor-{monitor.source}", daemon=True)
        self.monitor = monitor
        self.events = events
        self.stop_event = stop
        self.on_error = on_error
        self.on_clean = on_clean
        self.error_backoff = error_backoff
        self.failures_in_a_row = 0

    def run(self) -> None:
        next_round = time.monotonic()
        while not self.stop_event.is_set():
            wait = self._round()
            if wait is None:
                # Fixed rate, not fixed delay: a slow response does not push every
                # later poll back, so detection stays within one interval.
                next_round += self.monitor.interval
                wait = max(0.0, next_round - time.monotonic())
                if wait == 0.0:
                    next_round = time.monotonic()
            else:
                next_round = time.monotonic() + wait
            if wait and self.stop_event.wait(wait):
                return

    def _round(self) -> float | None:
        """One check; returns a backoff delay after an error, else None."""
        try:
            found = self.monitor.check()
        except MetadataError as err:
            self.on_error(self.monitor.source, err.reason)
            log.warning("%s: %s", self.monitor.source, err)
            return self._failed()
        except Exception as err:  # a bug in one monitor must not kill the agent
            self.on_error(self.monitor.source, type(err).__name__)
            log.exception("%s: unexpected error", self.monitor.source)
            return self._failed()
        self.failures_in_a_row = 0
        for item in found:
            self.events.put(item)
        if not any(isinstance(item, InterruptionEvent) for item in found):
            self.monitor.last_clean = time.time()
            if self.on_clean:
                self.on_clean(self.monitor.source)
        return None

    def _failed(self) -> float:
        self.failures_in_a_row += 1
        return 0.0 if self.failures_in_a_row == 1 else self.error_backoff
