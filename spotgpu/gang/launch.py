"""``spotgpu gang run -- torchrun ...``: the launch that brings a gang back by itself.

Why a wrapper around torchrun, and not torchrun's own ``--max-restarts``:

- torchrun counts a clean gang stop, a lost peer and a real crash alike against
  ``--max-restarts``, and exits 1 for all of them, so no one downstream can tell them apart;
- when it does exit it *closes* the rendezvous (``rdzv_handler.shutdown()``), for good, for
  that run id: a replacement VM could never join again;
- restarting inside one torchrun makes the noticed node rejoin the next round too.

So every incarnation of the gang is one torchrun run with ``--max-restarts 0`` under the run
id ``<rdzv-id>-e<epoch>``, and this launcher decides what comes next from the workers' own
exit code (:mod:`spotgpu.gang.exitcodes`), read from torchrun's ``ChildFailedError``:

======================  ==============================================================
this VM's agent: stop    exit 0, "drained": the VM is being reclaimed, it does not rejoin
0                        the job finished: exit 0 (and mark the job done for late joiners)
75 gang stop, 76 peer    bump the epoch, rejoin at once (never counted)
rendezvous closed        a round we joined ended before it formed: re-read the epoch
anything else            a real failure: rejoin up to ``--max-failures`` times, then exit
                         with that code (a signal N is 128+N)
======================  ==============================================================

The epoch lives in the rendezvous store itself (``compare_set``: the first node out bumps
it, the others find it bumped), so the survivors and the replacement meet in a fresh
rendezvous with no stale member to time out. The store is hosted off the preemptible VMs
(:mod:`spotgpu.gang.store`), so it outlives any of them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spotgpu.cliutil import UserError, whole
from spotgpu.gang.exitcodes import EXIT_GANG_STOP, EXIT_PEER_LOST, RESTARTABLE
from spotgpu.models.gang import DEFAULT_MAX_FAILURES, GangLaunch

#: Launcher-internal: the torchrun run found its rendezvous closed (the epoch moved on). Not a job code.
EXIT_RDZV_CLOSED = 78
#: Launcher-internal: the rendezvous did not form in ``join_timeout`` (no replacement came): a real failure.
EXIT_RDZV_TIMEOUT = 79


def torchrun_argv(launch: GangLaunch) -> list[str]:
    """The torchrun command line for one node (pure; the bootstrap and the local drill use it)."""
    conf = (
        f"is_host=false,join_timeout={launch.join_timeout_seconds},"
        f"last_call_timeout={launch.last_call_timeout_seconds},"
        f"keep_alive_interval={launch.keep_alive_seconds},keep_alive_max_attempt=3"
    )
    argv = [
        "torchrun",
        f"--nnodes={launch.min_nodes}:{launch.max_nodes}",
        f"--nproc-per-node={launch.nproc_per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={launch.rendezvous_host}:{launch.rendezvous_port}",
        f"--rdzv-id={launch.run_id}",
        f"--rdzv-conf={conf}",
        "--max-restarts=0",
        f"--monitor-interval={launch.monitor_interval_seconds:g}",
    ]
    if launch.local_addr:
        argv.append(f"--local-addr={launch.local_addr}")
    return [*argv, *launch.command]


def launcher_argv(launch: GangLaunch, spotgpu: str = "spotgpu") -> list[str]:
    """``spotgpu gang run --max-failures K -- torchrun ...``: what the systemd unit executes."""
    return [spotgpu, "gang", "run", f"--max-failures={launch.max_failures}", "--", *torchrun_argv(launch)]


# ---- the restart rule (pure) --------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    restart: bool
    counted: bool  # a real failure: counts against max_failures
    exit_code: int  # when not restarting
    why: str


def exit_status(code: int) -> int:
    """A process exit code as a shell reports it: a signal N (negative code) is 128+N."""
    return 128 - code if code < 0 else code


def worker_exit_code(codes: Sequence[int]) -> int:
    """One code for an incarnation from its failed workers' codes: a real failure wins, then 76, then 75."""
    real = [c for c in codes if c not in RESTARTABLE]
    if real:
        return exit_status(real[0])
    return EXIT_PEER_LOST if EXIT_PEER_LOST in codes else EXIT_GANG_STOP


@dataclass(frozen=True)
class RestartPolicy:
    """What the launcher does after one torchrun run ended with ``code``."""

    max_failures: int = DEFAULT_MAX_FAILURES

    def decide(self, code: int, *, leaving: bool, failures: int) -> Decision:
        if leaving:
            return Decision(False, False, 0, "this VM's agent has a notice or a drain: not rejoining (drained)")
        if code == 0:
            return Decision(False, False, 0, "the job finished")
        if code == EXIT_GANG_STOP:
            return Decision(True, False, 0, "clean gang stop (75): rejoining")
        if code == EXIT_PEER_LOST:
            return Decision(True, False, 0, "a peer was lost (76): rejoining")
        if code == EXIT_RDZV_CLOSED:
            return Decision(True, False, 0, "the rendezvous round closed before it formed: rejoining the current epoch")
        what = "no replacement joined in join_timeout" if code == EXIT_RDZV_TIMEOUT else f"exit {code}"
        if failures + 1 > self.max_failures:
            return Decision(
                False, True, code, f"real failure ({what}), {failures + 1} > maxFailures {self.max_failures}: giving up"
            )
        return Decision(True, True, 0, f"real failure ({what}), {failures + 1} of {self.max_failures}: rejoining")


# ---- torchrun, one incarnation, exit code passed through -----------------------------
def run_incarnation(args: argparse.Namespace, epoch: int) -> int:
    """One torchrun run (torch's own ``torch.distributed.run.run``) under run id ``<id>-e<epoch>``.

    In this process, so a node pays for one torch import, not two. Returns the workers'
    exit code instead of torchrun's blanket 1, or one of the launcher-internal rendezvous
    codes; a signal to the launcher surfaces as torch's ``SignalException``.
    """
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousClosedError, RendezvousTimeoutError
    from torch.distributed.run import run

    this = argparse.Namespace(**vars(args))
    this.rdzv_id = f"{args.rdzv_id}-e{epoch}"
    try:
        run(this)
    except ChildFailedError as err:
        return worker_exit_code([failure.exitcode for failure in err.failures.values()])
    except RendezvousClosedError:
        return EXIT_RDZV_CLOSED
    except RendezvousTimeoutError:
        return EXIT_RDZV_TIMEOUT
    return 0


@dataclass(frozen=True)
class TorchrunTarget:
    """What the launcher reads from the torchrun flags: where the store is, the gang's id."""

    host: str
    port: int
    run_id: str
    args: argparse.Namespace  # torchrun's own parse of its flags


def check_torchrun_args(argv: Sequence[str]) -> TorchrunTarget:
    """Validate the torchrun flags the launcher relies on; a problem is one line with the fix."""
    if not argv or os.path.basename(argv[0]) != "torchrun":
        raise UserError(
            f"command {' '.join(argv[:1]) or '(none)'!r}: expected `-- torchrun ARGS...`; fix: put torchrun after --"
        )
    from torch.distributed.run import parse_args

    args = parse_args(list(argv[1:]))
    if args.rdzv_backend != "c10d":
        raise UserError(f"--rdzv-backend {args.rdzv_backend!r}: the launcher needs c10d; fix: --rdzv-backend=c10d")
    if "is_host=false" not in (args.rdzv_conf or "").replace(" ", "").lower():
        raise UserError(
            f"--rdzv-conf {args.rdzv_conf!r}: without is_host=false a preemptible VM hosts the rendezvous store; "
            "fix: --rdzv-conf=is_host=false (and run `spotgpu gang store` on the rendezvous host)"
        )
    if args.max_restarts != 0:
        raise UserError(
            f"--max-restarts {args.max_restarts}: torchrun's restarts would count gang stops and close the rendezvous; "
            "fix: --max-restarts=0 and bound real failures with `spotgpu gang run --max-failures N`"
        )
    host, _, port = (args.rdzv_endpoint or "").rpartition(":")
    if not host or not port.isdigit() or int(port) == 0:
        raise UserError(
            f"--rdzv-endpoint {args.rdzv_endpoint!r}: expected HOST:PORT of the rendezvous host; fix: e.g. 10.0.0.5:29400"
        )
    if not args.rdzv_id or args.rdzv_id == "none":
        raise UserError("--rdzv-id: not set; fix: one id per job, the same on every node")
    return TorchrunTarget(host, int(port), args.rdzv_id, args)


# ---- the supervisor ----------------------------------------------------------------------
class Epochs:
    """The gang's incarnation counter and done flag, kept in the rendezvous store."""

    def __init__(self, store: Any, run_id: str) -> None:
        self.store = store
        self.key = f"spotgpu/gang/{run_id}/epoch"
        self.done_key = f"spotgpu/gang/{run_id}/done"

    def current(self) -> int:
        return int(self.store.compare_set(self.key, "", "0").decode())  # creates "0" if absent

    def advance_from(self, epoch: int) -> int:
        """Move past ``epoch`` (no-op if another node already did) and return the current one."""
        return int(self.store.compare_set(self.key, str(epoch), str(epoch + 1)).decode())

    def is_done(self) -> bool:
        return bool(self.store.check([self.done_key]))

    def mark_done(self) -> None:
        """Set the done flag and wait until the store holds it.

        ``TCPStore.set`` returns before the server applied it (no reply), and another node's
        ``check`` travels on its own connection, so it could still miss the flag: the job would
        look unfinished to a node that asks right after. ``compare_set`` answers, so once it
        returns every node sees the flag.
        """
        self.store.compare_set(self.done_key, "", "1")


def _log(line: str) -> None:
    stamp = time.strftime("%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
    print(f"{stamp} spotgpu gang run: {line}", file=sys.stderr, flush=True)


def supervise(
    torchrun: Sequence[str],
    *,
    max_failures: int,
    agent_address: str | None = None,
    store_timeout_seconds: float = 30.0,
) -> int:
    """Run torchrun incarnations until the job finishes, this VM drains, or failures run out."""
    from torch.distributed.elastic.multiprocessing.api import SignalException

    from spotgpu.agent.client import AgentClient
    from spotgpu.gang.store import connect_store

    target = check_torchrun_args(torchrun)
    epochs = Epochs(connect_store(target.host, target.port, store_timeout_seconds), target.run_id)
    agent = AgentClient(agent_address, register=False)
    policy = RestartPolicy(max_failures)
    failures = 0
    try:
        while True:
            if epochs.is_done():
                _log("the job is already done: nothing to join")
                return 0
            epoch = epochs.current()
            _export_zone(agent)
            _log(f"joining {target.run_id} epoch {epoch}")
            code = run_incarnation(target.args, epoch)
            leaving = code != 0 and agent.should_stop()
            decision = policy.decide(code, leaving=leaving, failures=failures)
            _log(f"epoch {epoch} ended with {code}: {decision.why}")
            failures += int(decision.counted)
            if not decision.restart:
                if code == 0:
                    epochs.mark_done()
                return decision.exit_code
            if code == EXIT_RDZV_CLOSED:
                time.sleep(0.2)  # the nodes that closed it are moving to the next epoch
            epochs.advance_from(epoch)
    except SignalException as err:  # torchrun stopped its workers already
        _log(f"stopped by {err.sigval.name}")
        return 128 + int(err.sigval)


def _export_zone(agent: Any) -> None:
    """``$SPOTGPU_ZONE`` for the workers (torchrun runs in this process: they inherit it) from this VM's
    agent, unless set: a tiered checkpoint places each shard's peer copies in other zones."""
    from spotgpu.models.tiers import ZONE_ENV

    if not os.environ.get(ZONE_ENV):
        zone = agent.zone()
        if zone:
            os.environ[ZONE_ENV] = zone


def cmd_run(args: argparse.Namespace) -> int:
    torchrun = list(args.torchrun)
    if torchrun[:1] == ["--"]:
        torchrun = torchrun[1:]
    return supervise(torchrun, max_failures=args.max_failures, agent_address=args.agent)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from spotgpu.gang.store import register_store

    p = sub.add_parser("gang", help="launch and host multi-node gang jobs (torchrun, rendezvous store)")
    gang = p.add_subparsers(dest="gang_command", metavar="COMMAND", required=True)
    run = gang.add_parser("run", help="run `torchrun ...` incarnations, restarting by the workers' exit code")
    run.add_argument(
        "--max-failures",
        type=whole(0),
        default=DEFAULT_MAX_FAILURES,
        help="real failures (not 75/76) rejoined before giving up",
    )
    run.add_argument("--agent", default=None, help="this VM's agent address (default: $SPOTGPU_AGENT or its socket)")
    run.add_argument("torchrun", nargs=argparse.REMAINDER, help="-- torchrun ARGS... (with --max-restarts=0)")
    run.set_defaults(func=cmd_run)
    register_store(gang)
