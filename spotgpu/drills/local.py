"""``spotgpu drill local --nodes N -- CMD...``: a whole gang interruption on one machine (N >= 1).

Each simulated VM is a loopback fake metadata server, a real ``spotgpu agent run`` and a
real ``spotgpu gang run -- torchrun ...`` (:mod:`spotgpu.drills.local_nodes`); the drill
hosts the rendezvous TCPStore the way the rendezvous host does. It waits until every rank
has restored (the gang helper reports it to its agent), raises a notice on one node (or,
with ``--during-save``, the moment a periodic save starts writing), reclaims that node once
its agent drained, starts a replacement, and follows the gang until the job finishes.

Each simulated VM has a local disk and a zone (``--zones``: nodes take zones in turn), exported as
``SPOTGPU_LOCAL_DIR`` and ``SPOTGPU_ZONE`` for a tiered checkpoint; a reclaim deletes the disk.
``--also-reclaim N`` reclaims node N without notice the moment the notice is raised (a zone reclaim,
or a node and its peer), and replaces it too. Per node it reports where the resumed rank's state
came from (``restore``: source, seconds, bytes, step) and the recovery's phases (notice, every rank
stopped, the replacement joined, every rank restored, the first step), in seconds after the notice.

Everything it reports it reads from the agents' events logs (``gang-stop``, ``restored``,
``first-step``, ``drained``), so it works for any CMD whose loop uses :class:`spotgpu.gang.Gang`. Every rank's
environment is what a job reads on a pool VM, pointed at its simulated VM:
``SPOTGPU_AGENT`` (the agent), ``SPOTGPU_AGENT_CONFIG`` (its config: the checkpoint interval) and
``SPOTGPU_CHECKPOINT_URL`` (the drill's store), so a docs recipe runs under the drill as written;
``--nodes 1`` gives a single-node job the same, and ``--no-notice`` just runs it. It fails
(exit 1) if a rank hung (a phase ran past ``--timeout-seconds``), crashed (a launcher
exited non-zero), stopped at different steps (ranks that lost a peer may stop one step apart: a
collective can finish on some ranks before the failure reaches the others), or resumed from an older
step than the gang committed.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from spotgpu.catalogue import CLOUDS
from spotgpu.checkpoint import layout
from spotgpu.cliutil import (
    EXIT_CHECK_FAILED,
    EXIT_OK,
    UserError,
    add_json_flag,
    add_seconds_flag,
    number,
    print_json,
    whole,
)
from spotgpu.contract.agent_records import (
    RECORD_KEY,
    TS_KEY,
    AgentRecord,
    AgentRecordKind,
    GangStop,
    Restored,
    read_agent_line,
)
from spotgpu.contract.checkpoint_report import GangOutcome
from spotgpu.drills.local_nodes import Node


class Hung(Exception):
    """A phase did not finish in time: some rank (or the launch) hung."""


@dataclass(frozen=True)
class LocalDrill:
    """What to run; validated once, by :func:`check_args` (CLI) or the caller (tests)."""

    command: list[str]
    nodes: int = 2
    notice_node: int | None = 0
    provider: str = "aws"
    lead_seconds: float | None = None
    during_save: bool = False
    checkpoint_url: str | None = None
    timeout_seconds: float = 240.0
    notice_after_seconds: float = 1.0
    workdir: Path | None = None
    run_id: str = "drill"
    zones: int = 1
    also_reclaim: tuple[int, ...] = ()
    #: a local tier on every node (keep 2, one peer copy), the store getting every k-th save; None: store only
    durable_every: int | None = 2


@dataclass
class Report:
    """The drill's findings; :meth:`document` is the ``--json`` form (camelCase keys)."""

    nodes: int
    provider: str
    notice_node: int | None
    status: str = "running"
    reasons: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    stops: dict[str, dict[str, Any]] = field(default_factory=dict)
    resumed: dict[str, int | None] = field(default_factory=dict)
    launchers: dict[str, int | None] = field(default_factory=dict)
    processes_left: list[int] = field(default_factory=list)
    workdir: str = ""
    restores: dict[str, dict[str, Any]] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    zones: dict[str, str] = field(default_factory=dict)
    reclaimed: list[str] = field(default_factory=list)

    def fail(self, reason: str) -> None:
        self.reasons.append(reason)

    def document(self) -> dict[str, Any]:
        committed = [s.get("committed") for s in self.stops.values()]
        steps = sorted({int(s["step"]) for s in self.stops.values() if s.get("step") is not None})
        return {
            "nodes": self.nodes,
            "provider": self.provider,
            "noticeNode": self.notice_node,
            "status": self.status,
            "reasons": self.reasons,
            "stopSteps": {name: stop.get("step") for name, stop in self.stops.items()},
            "stops": self.stops,
            "finalCheckpoint": {
                "committed": bool(committed) and all(committed),
                "step": steps[0] if len(steps) == 1 else None,
            },
            "resumedSteps": self.resumed,
            "restores": self.restores,
            "phases": {key: round(value, 3) for key, value in self.phases.items()},
            "zones": self.zones,
            "reclaimed": self.reclaimed,
            "launcherExits": self.launchers,
            "timings": {key: round(value, 3) for key, value in self.timings.items()},
            "processesLeft": self.processes_left,
            "workdir": self.workdir,
        }


def _local_dir(url: str) -> Path:
    parts = urlsplit(url)
    if parts.scheme != "file":
        raise UserError(f"--checkpoint-url {url!r}: --during-save watches a local store; fix: a file:// URL")
    return Path(parts.path)


def _generation_started(root: Path, seen: set[str]) -> bool:
    """A generation appeared whose step has no commit marker yet: a save is writing.

    Looks where either store format puts a generation's objects (:mod:`spotgpu.checkpoint.layout`):
    ``shards/<hh>/<generation>/`` since format 2, ``generations/<generation>/`` before.
    """
    dirs = [root / layout.GENERATIONS]
    shards = root / layout.SHARDS
    if shards.is_dir():
        dirs += [bucket for bucket in shards.iterdir() if bucket.is_dir()]
    for area in dirs:
        if not area.is_dir():
            continue
        for gen in area.iterdir():
            name = layout.parse_generation(gen.name)
            if name is None or gen.name in seen:
                continue
            seen.add(gen.name)
            if not (root / layout.commit_path(name.step)).exists():
                return True
    return False


class Drill:
    def __init__(self, spec: LocalDrill, say: Callable[[str], None]) -> None:
        self.spec = spec
        self.say = say
        self.started = time.time()
        self.deadline = time.monotonic() + spec.timeout_seconds
        self.workdir = spec.workdir or Path(tempfile.mkdtemp(prefix="spotgpu-drill-"))
        self.report = Report(spec.nodes, spec.provider, spec.notice_node, workdir=str(self.workdir))
        self.all_nodes: list[Node] = []
        self.store: Any = None
        #: nodes the drill reclaimed without notice (--also-reclaim)
        self.unannounced: set[str] = set()

    # -- plumbing ------------------------------------------------------------------
    def mark(self, key: str, at: float | None = None) -> float:
        at = time.time() if at is None else at
        self.report.timings[key] = at - self.started
        return at

    def wait(self, what: str, predicate: Callable[[], Any], step: float = 0.1) -> Any:
        while True:
            self.check_crashes()
            value = predicate()
            if value:
                return value
            if time.monotonic() > self.deadline:
                raise Hung(f"{what}: not within --timeout-seconds {self.spec.timeout_seconds:g}")
            time.sleep(step)

    def wait_running(self, gang: list[Node], when: str, what: str, predicate: Callable[[], Any]) -> Any:
        """:meth:`wait`, but a job that ended (exit 0) with no rank ever reporting fails at once, not at the timeout."""

        def done_or_gone() -> Any:
            value = predicate()
            if not value and all(n.poll() is not None for n in gang):
                value = predicate()  # an event written just before the launcher left
                if not value:
                    raise Hung(self.finished_early(when))
            return value

        return self.wait(what, done_or_gone)

    def finished_early(self, when: str) -> str:
        return (f"the job ran to its end {when}, so no rank stopped; fix: give the job more steps (the drill "
                f"raises the notice {self.spec.notice_after_seconds:g} s after every rank restored)")

    def check_crashes(self, allow: tuple[int, ...] = ()) -> None:
        for node in self.all_nodes:
            if node.name in self.unannounced:
                continue  # the drill took it without notice: its exit is the reclaim, not a crash
            code = node.poll()
            if code not in (None, 0, *allow):
                raise Hung(f"{node.name}: launcher exited {code} (a rank crashed or gave up; see {node.workdir})")

    def start_node(self, launch: Any, url: str, replaces: Node | None = None) -> Node:
        from spotgpu.drills.local_nodes import Node
        from spotgpu.models.tiers import LocalTierConfig

        index = len(self.all_nodes)
        slot = index if replaces is None else replaces.slot
        zone = replaces.zone if replaces is not None else f"zone-{chr(ord('a') + index % self.spec.zones)}"
        every = self.spec.durable_every
        tier = None if every is None else LocalTierConfig(path="/unused", keep=2, peer_copies=1,
                                                          durable_interval_seconds=600 * every, ram_disk_gib=1)  # fmt: skip
        node = Node(index, self.spec.provider, self.workdir / f"node{index}", zone, slot, tier)
        self.report.zones[node.name] = zone
        self.all_nodes.append(node)
        env = dict(os.environ)
        node.start(launch, url, env)
        self.mark(f"{node.name}Started", node.started_at)
        return node

    @staticmethod
    def records(node: Node, kind: AgentRecordKind, after: float = 0.0) -> list[tuple[float, AgentRecord]]:
        """The node agent's records of ``kind`` since ``after``, with their times, read through the contract."""
        out = []
        for line in node.events():
            ts = line.get(TS_KEY)
            if line.get(RECORD_KEY) == kind.value and isinstance(ts, int | float) and ts >= after:
                record = read_agent_line(line)
                if record is not None:
                    out.append((float(ts), record))
        return out

    # -- the drill -----------------------------------------------------------------------
    def run(self) -> Report:
        from spotgpu.gang.launch import GangLaunch
        from spotgpu.gang.store import serve_store

        spec = self.spec
        url = spec.checkpoint_url or f"file://{self.workdir / 'ckpt'}"
        self.store = serve_store("127.0.0.1", 0)
        launch = GangLaunch(
            command=spec.command,
            min_nodes=spec.nodes,
            max_nodes=spec.nodes,
            rendezvous_host="127.0.0.1",
            rendezvous_port=self.store.port,
            run_id=spec.run_id,
            join_timeout_seconds=max(10, int(spec.timeout_seconds)),
            keep_alive_seconds=1,
            monitor_interval_seconds=0.2,
            max_failures=0,
            local_addr="127.0.0.1",
        )
        self.say(f"drill local: {spec.nodes} node(s) ({spec.provider}), store 127.0.0.1:{self.store.port}, workdir {self.workdir}")
        gang = [self.start_node(launch, url) for _ in range(spec.nodes)]
        self.wait("every rank restored", lambda: all(self.records(n, AgentRecordKind.RESTORED) for n in gang))
        self.mark("allRestored")
        self.say("drill local: every rank is training")
        if spec.notice_node is None:
            return self.finish(gang, None, 0.0)
        noticed = gang[spec.notice_node]
        if spec.during_save:
            root, seen = _local_dir(url), set[str]()
            _generation_started(root, seen)  # generations already there do not count
            self.wait("a periodic save starting", lambda: _generation_started(root, seen), step=0.005)
        else:
            time.sleep(spec.notice_after_seconds)
        if all(n.poll() is not None for n in gang):
            raise Hung(self.finished_early("before the notice"))
        raised = self.mark("noticeRaised", noticed.raise_notice(spec.lead_seconds))
        self.say(f"drill local: notice on {noticed.name}")
        lost = [gang[i] for i in spec.also_reclaim]
        if lost:  # once the noticed VM's agent has its notice (so it does not rejoin the gang they break)
            self.wait(f"{noticed.name}'s notice", lambda: self.records(noticed, AgentRecordKind.NOTICE, raised), step=0.02)
        for node in lost:  # reclaimed with it, no notice: a zone going, or a node and its peer
            node.kill(abrupt=True)
            self.report.reclaimed.append(node.name)
            self.unannounced.add(node.name)
            self.say(f"drill local: {node.name} reclaimed without notice")
        lost_replacements = [self.start_node(launch, url, node) for node in lost]
        standing = [n for n in gang if n not in lost]
        stops = self.wait_running(
            standing, "before the notice reached it", "every rank's gang stop",
            lambda: (s := [self.records(n, AgentRecordKind.GANG_STOP, raised) for n in standing]) and all(s) and s,
        )  # fmt: skip
        for node, records in zip(standing, stops, strict=True):
            at, stop = records[0]
            assert isinstance(stop, GangStop)
            self.report.stops[node.name] = {
                "step": stop.step, "committed": stop.committed, "role": stop.role, "outcome": stop.outcome,
                "reason": stop.reason, "seconds": stop.seconds, "noticedRanks": stop.noticed_ranks,
            }  # fmt: skip
            self.mark(f"{node.name}StopReported", at)
        self.say(f"drill local: stop steps {[s.get('step') for s in self.report.stops.values()]}")
        self.wait(f"{noticed.name} drained", lambda: self.records(noticed, AgentRecordKind.DRAINED, raised))
        self.mark("noticedDrained", self.records(noticed, AgentRecordKind.DRAINED, raised)[0][0])
        # The group launches the replacement as the node drains (capacity rebalancing starts it
        # even earlier); the noticed VM is reclaimed once its launcher left.
        replacement = self.start_node(launch, url, noticed)
        self.say(f"drill local: replacement {replacement.name} started")
        self.wait(f"{noticed.name}'s launcher leaving", lambda: noticed.poll() is not None)
        self.mark("noticedLauncherExited", noticed.launcher_exited_at)
        noticed.kill()  # the cloud reclaims the VM
        self.mark("noticedReclaimed")
        self.report.reclaimed.insert(0, noticed.name)
        replacements = [replacement, *lost_replacements]
        gang = [n for n in standing if n is not noticed] + replacements
        return self.finish(gang, noticed, raised, replacements)

    def finish(self, gang: list[Node], noticed: Node | None, raised: float, replacements: list[Node] | None = None) -> Report:
        report = self.report
        if noticed is not None:
            resumed = self.wait(
                "every rank resumed",
                lambda: (r := [self.records(n, AgentRecordKind.RESTORED, raised) for n in gang]) and all(r) and r,
            )
            for node, records in zip(gang, resumed, strict=True):
                at, restored = records[-1]
                assert isinstance(restored, Restored)
                report.resumed[node.name] = restored.step
                report.restores[node.name] = {"source": restored.source, "seconds": restored.seconds,
                                              "bytes": restored.nbytes, "step": restored.step,
                                              "reason": restored.reason}  # fmt: skip
                self.mark(f"{node.name}Resumed", at)
            self.say(f"drill local: resumed steps {list(report.resumed.values())}")
            self.phase_times(gang, replacements or [], raised)
        self.wait("the job finishing", lambda: all(n.poll() is not None for n in gang), step=0.2)
        self.mark("jobFinished")
        for node in self.all_nodes:
            report.launchers[node.name] = node.poll()
        self.judge()
        return report

    def phase_times(self, gang: list[Node], replacements: list[Node], raised: float) -> None:
        """The recovery's phases in seconds after the notice: every rank stopped, the replacement(s) joined
        (began restoring: the new gang's process group formed), every rank restored, the first step."""
        phases = self.report.phases
        stops = [at for n in self.all_nodes for at, _ in self.records(n, AgentRecordKind.GANG_STOP, raised)[:1]]
        if stops:
            phases["stopped"] = max(stops) - raised
        joined = [r.started_at for n in replacements for _, r in self.records(n, AgentRecordKind.RESTORED, raised)[-1:]
                  if isinstance(r, Restored) and r.started_at is not None]  # fmt: skip
        if joined:
            phases["replacementJoined"] = max(joined) - raised
        phases["restored"] = max(self.records(n, AgentRecordKind.RESTORED, raised)[-1][0] for n in gang) - raised
        try:
            firsts = self.wait("every rank's first step",
                               lambda: (f := [self.records(n, AgentRecordKind.FIRST_STEP, raised) for n in gang])
                               and (all(f) or all(n.poll() is not None for n in gang)) and f)  # fmt: skip
        except Hung:
            return
        if all(firsts):
            phases["firstStep"] = max(f[-1][0] for f in firsts) - raised

    def judge(self) -> None:
        report = self.report
        for name, code in report.launchers.items():
            if code != 0 and name not in self.unannounced:  # reclaimed without notice: killed, not crashed
                report.fail(f"{name}: launcher exited {code}")
        for finding in stop_step_findings(report.stops):
            report.fail(finding)
        committed = [stop for stop in report.stops.values() if stop.get("committed")]
        floor = max((int(stop["step"]) for stop in committed), default=None)
        for name, step in report.resumed.items():
            if floor is not None and (step is None or step < floor):
                report.fail(f"{name} resumed from step {step}, older than the committed step {floor}")
        report.status = "failed" if report.reasons else "passed"

    def close(self) -> None:
        for node in self.all_nodes:
            node.kill()
        self.report.processes_left = sorted(pid for node in self.all_nodes for pid in node.pids())
        if self.report.processes_left:
            self.report.fail(f"processes left running after the drill: {self.report.processes_left}")
            self.report.status = "failed"
        self.store = None


def stop_step_findings(stops: dict[str, dict[str, Any]]) -> list[str]:
    """What is wrong with the ranks' stop steps. Ranks that stopped by agreement (a notice) must share one
    step. A rank that lost a peer stops where its collective failed, and a collective can finish on some
    ranks before the failure reaches the others (gloo's ring all-reduce: a rank has its result once its
    neighbours sent theirs), so lost-peer stops may lie one step apart; further apart, a rank ran on alone."""
    agreed = {stop.get("step") for stop in stops.values() if stop.get("outcome") != GangOutcome.PEER_LOST}
    if len(agreed) > 1:
        return [f"the ranks stopped at different steps: {sorted(map(str, agreed))}"]
    steps = [stop.get("step") for stop in stops.values()]
    if None in steps and len(set(steps)) > 1:
        return [f"the ranks stopped at different steps: {sorted(map(str, set(steps)))}"]
    known = [int(step) for step in steps if step is not None]
    if known and max(known) - min(known) > 1:
        return [f"the ranks stopped more than one step apart after losing a peer: {sorted(set(known))}"]
    return []


def run_drill(spec: LocalDrill, say: Callable[[str], None] = print) -> Report:
    """Run the drill; always kills what it started. Hangs and crashes are failures, not raises."""
    drill = Drill(spec, say)
    try:
        drill.run()
    except (Hung, RuntimeError, TimeoutError) as err:  # a node that could not start is a failed drill too
        for node in drill.all_nodes:
            drill.report.launchers[node.name] = node.poll()
        drill.report.fail(str(err))
        drill.report.status = "failed"
    finally:
        drill.close()
    return drill.report


def check_args(args: argparse.Namespace) -> LocalDrill:
    command = list(args.cmd)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UserError("CMD: missing; fix: spotgpu drill local --nodes 2 -- python -m spotgpu.drills.gang_job ...")
    if not 0 <= args.notice_node < args.nodes:
        raise UserError(f"--notice-node {args.notice_node}: no such node; fix: 0..{args.nodes - 1}")
    also = tuple(args.also_reclaim or ())
    for node in also:
        if not 0 <= node < args.nodes or node == args.notice_node or also.count(node) > 1:
            raise UserError(f"--also-reclaim {node}: not another node of the gang; fix: a node 0..{args.nodes - 1} "
                            f"other than --notice-node {args.notice_node}, each once")  # fmt: skip
    if also and args.no_notice:
        raise UserError("--also-reclaim: nodes go with the noticed one, and --no-notice raises none; fix: drop one")
    if args.provider == "gcp" and args.lead_seconds is not None:
        raise UserError("--lead-seconds: a GCP preemption has no lead of its own (the notice contract gives it); fix: drop it")
    if args.during_save and not args.checkpoint_url:
        raise UserError("--during-save: needs the job's store to watch; fix: --checkpoint-url file:///path (the job's --ckpt)")
    if args.checkpoint_url:
        _local_dir(args.checkpoint_url)
    if command[0] == "python":
        command[0] = sys.executable
    if command[0] == sys.executable and command[1:2] == ["-m"] and len(command) > 2:
        command = ["-m", *command[2:]]  # torchrun runs modules itself
    elif command[0] == sys.executable:
        command = command[1:]
    else:
        command = ["--no-python", *command]
    return LocalDrill(
        command=command,
        nodes=args.nodes,
        notice_node=None if args.no_notice else args.notice_node,
        provider=args.provider,
        lead_seconds=args.lead_seconds,
        during_save=args.during_save,
        checkpoint_url=args.checkpoint_url,
        timeout_seconds=args.timeout_seconds,
        workdir=Path(args.workdir) if args.workdir else None,
        zones=args.zones,
        also_reclaim=also,
        durable_every=None if args.no_tiers else args.durable_every,
        notice_after_seconds=args.notice_after_seconds,
    )


def render(doc: dict[str, Any]) -> str:
    notice = "no notice" if doc["noticeNode"] is None else f"notice on node{doc['noticeNode']}"
    lines = [f"drill {'passed' if doc['status'] == 'passed' else 'FAILED'}: {doc['nodes']} node(s), {notice}"]
    lines.append(f"  stop steps:     {doc['stopSteps']}")
    final = doc["finalCheckpoint"]
    lines.append(f"  final checkpoint: {'committed' if final['committed'] else 'NOT committed'} at step {final['step']}")
    lines.append(f"  resumed steps:  {doc['resumedSteps']}")
    if doc["reclaimed"]:
        lines.append(f"  reclaimed:      {', '.join(doc['reclaimed'])} (zones {doc['zones']})")
    for name, restore in doc["restores"].items():
        size = "-" if restore.get("bytes") is None else f"{restore['bytes'] / 2**20:.1f} MiB"
        why = f" ({restore['reason']})" if restore.get("reason") else ""
        lines.append(f"  {name} restored step {restore.get('step')} from {restore.get('source')} in "
                     f"{restore.get('seconds')} s, {size}{why}")  # fmt: skip
    if doc["phases"]:
        lines.append("  phases (s after the notice): " + ", ".join(f"{k} {v:g}" for k, v in doc["phases"].items()))
    lines.append(f"  launcher exits: {doc['launcherExits']}")
    lines.append("  timings (s from start): " + ", ".join(f"{k} {v:g}" for k, v in doc["timings"].items()))
    lines.extend(f"  reason: {reason}" for reason in doc["reasons"])
    return "\n".join(lines)


def cmd_local(args: argparse.Namespace) -> int:
    spec = check_args(args)
    stream = sys.stderr if args.json else sys.stdout
    # A CI job's timeout sends SIGTERM: leave through run_drill's cleanup, which kills every node.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    report = run_drill(spec, say=lambda line: print(line, file=stream, flush=True))
    doc = report.document()
    if args.json:
        print_json(doc)
    else:
        print(render(doc))
    return EXIT_OK if report.status == "passed" else EXIT_CHECK_FAILED


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("local", help="a real gang job on this machine (1 node or more): notice, gang stop, replacement, resume")
    p.add_argument("--nodes", type=whole(1), default=2, help="simulated VMs, one rank each (1: a single-node job)")
    p.add_argument("--notice-node", type=whole(0), default=0, help="the node that gets the notice")
    p.add_argument("--also-reclaim", type=whole(0), action="append", default=None, metavar="N",
                   help="reclaim node N too, without notice, when the noticed one goes (repeat for more)")
    p.add_argument("--no-tiers", action="store_true",
                   help="no local tier on the simulated VMs: the job keeps every save in the store (to compare)")
    p.add_argument("--durable-every", type=whole(1), default=2, metavar="K",
                   help="with the local tier: the store gets every K-th save (default 2)")
    p.add_argument("--zones", type=whole(1), default=1,
                   help="zones the simulated VMs take in turn (SPOTGPU_ZONE; a tiered checkpoint's peers go across)")
    p.add_argument("--no-notice", action="store_true",
                   help="raise no notice: run the job on its local agents and fake metadata until it ends")  # fmt: skip
    p.add_argument("--provider", choices=CLOUDS, default="aws", help="whose notice (fake metadata server)")
    p.add_argument("--lead-seconds", type=number(0), default=None, help="AWS/Azure: seconds between the notice and the reclaim")
    p.add_argument("--during-save", action="store_true", help="raise the notice as a periodic save starts writing")
    add_seconds_flag(p, "--notice-after-seconds", 1.0, "seconds of training after every rank restored before the notice")
    p.add_argument("--checkpoint-url", default=None, help="the job's file:// store (needed by --during-save)")
    add_seconds_flag(p, "--timeout-seconds", 240.0, "the whole drill must end within this many seconds; past it, a rank hung")
    p.add_argument("--workdir", default=None, help="where node logs go (default: a new temporary directory)")
    add_json_flag(p, "the drill's findings and timings")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD...: the job each rank runs (torchrun starts it)")
    p.set_defaults(func=cmd_local)
