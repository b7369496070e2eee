"""The fallback controller: a reconcile loop per pool that walks the replacement ladder.

It observes desired vs running capacity, launch failures (classified by reason),
interruption events and how long the pool has waited, then acts along the
ladder: keep retrying the pool, widen it, grow the on-demand fallback group up to
the step's cost ceiling, or queue/defer. It is deterministic and restart-safe:
state is derived from the cloud plus one small JSON record in the checkpoint store.
"""
