"""A metadata value's transitions: the identity of a notice that carries no id of its own.

GCP's ``maintenance-event`` and ``preempted`` and AWS's ``target-lifecycle-state`` are bare
values. The same value shown twice in a row is one notice; the value going away and coming
back is a new one. The ETag cannot say which: a server may derive it from the value (the
value coming back then brings the old ETag back), so the identity is the run of equal values
this agent has seen, counted by :class:`Transitions`. The GCP hanging GET and its stall guard
read the same value, so they share one tracker and name each notice alike.

Two readers must also observe in the order the server answered: a reader whose thread pauses
between the answer and :meth:`Transitions.observe` would otherwise count a stale value as a new
run, and the fresh value read next as a second notice. :attr:`Transitions.in_order` is held
across a read and its observation for that.
"""

from __future__ import annotations

import threading


class Transitions:
    """Counts runs of equal values; thread-safe (two readers may observe one value)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value: str | None = None
        self._runs = 0
        #: Held across one plain read and its :meth:`observe`, so runs follow the server's order.
        self.in_order = threading.Lock()

    def observe(self, value: str) -> int:
        """The number of the run ``value`` belongs to: unchanged while the value is unchanged."""
        return self.enter(value)[0]

    def enter(self, value: str) -> tuple[int, bool]:
        """The run ``value`` belongs to, and whether this call began it (exactly one reader's does)."""
        with self._lock:
            began = value != self._value
            if began:
                self._value = value
                self._runs += 1
            return self._runs, began
