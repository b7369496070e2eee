"""Recovery with checkpoint tiers (issue 33): restore per source, training blocked per save, lost work and cost.

    .venv/bin/python bench/recovery.py                  # 1 GiB per rank, 2 gloo ranks, moto S3
    .venv/bin/python bench/recovery.py --gib 0.25 --skip-io    # only the trace-driven part

Three tables, each with its baseline in the same run:

1. **Restore of one shard per rank** (``--gib`` GiB, real gloo ranks on loopback, two "nodes"
   in two zones): from the rank's own local tier, from a peer's copy (the other node is lost: its
   replacement pulls over the process group), and from the object store (moto S3 on loopback: every
   node lost). The tier on two media: a RAM disk (tmpfs: what a type without NVMe gets) and this
   machine's disk with the page cache dropped before each read (a cold disk; the sandbox's virtual
   disk, far slower than an instance's NVMe). moto serves from memory over loopback, so its figure
   flatters the store. Every read verifies every hash. Ratio: store seconds / source seconds
   (goal: local >= 10x).
2. **Training blocked per periodic save**: the same state saved by ``TieredCheckpointManager.save``
   (it returns once the generation counts: local write, the peer copy checked as it lands, the
   local commit; the upload is in the background) as the first save of a manager, then by one
   manager's ``save_async``, ``save``, ``save_async`` (``save_async`` returns after the host copy;
   the rest runs on the tier's save thread; the second ``save_async`` copies into the first's host
   buffers, as a steady run does), with the local commit's steps, and by the store-only
   ``CheckpointManager.save`` and ``save_async`` to moto. Each row says how long the call held the
   training thread and when the generation counted. The same bytes as a framework's checkpoint files
   through the HF/Lightning callbacks' periodic save: ``callback save`` as they saved before (the tier's
   ``save``), ``callback save_periodic`` as they save now (its ``save_async``; the files are read before
   it returns).
3. **Lost work and effective cost on the shipped traces**, prod workload (``stacks/Pulumi.prod.yaml``)
   with and without tiers: the cost model per prod pool (its zones: peers across them), and the
   digital twin replaying the AWS pool's ladder on the 16-node traces, twice: a spot group per zone (the
   gang in its home zone, peers in the same zone: the case the traces make hard) and the pool as deployed
   (one spot group over its zones: the gang and its peers spread across them).

Nothing here asserts timings; the numbers and the commands go to bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "checkpoint")]

GIB = 1 << 30


# --- part 1 and 2: real ranks ------------------------------------------------------------------
def _state(gib: float, rank: int) -> dict[str, np.ndarray]:
    n = int(gib * GIB) // 4 // 8
    rng = np.random.default_rng(rank)
    return {f"layer{i}": rng.standard_normal(n, dtype=np.float32) for i in range(8)}


def _drop_cache(path: Path) -> None:
    for f in [p for p in path.rglob("*") if p.is_file()]:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _rank(rank: int, world: int, port: int, root: str, gib: float, s3: dict[str, Any], media: dict[str, str]) -> None:
    import datetime as dt

    import torch.distributed as dist

    from spotgpu.checkpoint import CheckpointManager
    from spotgpu.checkpoint.tiered import LocalTier, TieredCheckpointManager

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=dt.timedelta(seconds=600))  # fmt: skip
    url = "s3://ckpt/recovery-tiered"
    state = _state(gib, rank)
    out: dict[str, Any] = {"media": {}}

    def tiered(where: Path, durable: int = 1) -> TieredCheckpointManager:
        tier = LocalTier(where / "local", keep=1, peer_copies=1, durable_every=durable, zone=f"zone-{rank % 2}")
        return TieredCheckpointManager(url, tier, rank=rank, world_size=world, session="bench", store_options=s3)

    def restore(where: Path, drop: bool) -> dict[str, Any]:
        if drop:
            _drop_cache(where)
        manager = tiered(where, 1000)
        dist.barrier()
        t0 = time.perf_counter()
        result = manager.restore()
        seconds = time.perf_counter() - t0
        assert result is not None and result.step == 1
        assert all(np.array_equal(result.state[k], state[k]) for k in state), "restored bytes differ"
        manager.close(60)
        return {"seconds": seconds, "source": result.source, "bytes": result.nbytes}

    for medium, base_dir in media.items():
        base = Path(base_dir) / f"{medium}-{rank}"
        node = base / "node"
        background = _background_saves(tiered(base / "bg", 1000), state, dist)
        shutil.rmtree(base / "bg", ignore_errors=True)
        callback = _callback_saves(tiered(base / "cb", 1000), state, base / "framework", dist)
        shutil.rmtree(base / "cb", ignore_errors=True)
        upload = medium == next(iter(media))  # the first medium's save feeds the store restore below
        mgr = tiered(node, 1 if upload else 1000)
        dist.barrier()
        t0 = time.perf_counter()
        mgr.save(1, state)
        blocked = time.perf_counter() - t0
        phases = dict(mgr.last_save_phases)
        mgr.close(3600)  # the background upload: the store then holds step 1 for the store restore
        cold = medium == "disk"
        raw = _raw_read(mgr.node.shard_root(rank), cold)
        local = restore(node, cold)
        if rank == 1:  # node 1 is lost: its replacement starts empty and pulls its shard from node 0's copy
            shutil.rmtree(node)
        dist.barrier()
        peer = restore(node if rank == 0 else base / "replacement", cold)
        out["media"][medium] = {"blocked": blocked, "phases": phases, "raw": raw, "local": local, "peer": peer,
                                "background": background, "callback": callback}  # fmt: skip
        dist.barrier()
        shutil.rmtree(base, ignore_errors=True)
    out["store"] = restore(Path(root) / f"fresh{rank}", False)  # every node lost: every rank reads the store
    plain = CheckpointManager("s3://ckpt/recovery-plain", rank=rank, world_size=world, session="bench", store_options=s3)
    dist.barrier()
    t0 = time.perf_counter()
    plain.save(1, state)
    out["blockedStore"] = time.perf_counter() - t0
    dist.barrier()
    t0 = time.perf_counter()
    handle = plain.save_async(2, state)
    out["storeAsync"] = {"blocked": time.perf_counter() - t0}
    handle.wait()
    out["storeAsync"]["counted"] = time.perf_counter() - t0
    Path(root, f"result-r{rank}.json").write_text(json.dumps(out))
    dist.destroy_process_group()


def _background_saves(mgr: Any, state: dict[str, np.ndarray], dist: Any) -> dict[str, Any]:
    """``save_async`` (its host buffers new), ``save``, ``save_async`` again (into the first's host buffers, as a
    steady run does), one manager: how long each call held the training thread, and when each generation
    counted (every rank's write and copies verified), from the call."""
    out: dict[str, Any] = {}
    for step, call in ((1, "save_async"), (2, "save"), (3, "save_async")):
        dist.barrier()
        t0 = time.perf_counter()
        if call == "save":
            mgr.save(step, state)
            blocked = time.perf_counter() - t0
        else:
            handle = mgr.save_async(step, state)
            blocked = time.perf_counter() - t0
            handle.wait()
        out[f"{call} #{step}"] = {"blocked": blocked, "counted": time.perf_counter() - t0,
                                  "phases": dict(mgr.last_save_phases)}  # fmt: skip
    mgr.close(60)
    return out


def _callback_saves(mgr: Any, state: dict[str, np.ndarray], directory: Path, dist: Any) -> dict[str, Any]:
    """The HF/Lightning callbacks' periodic save of a framework checkpoint holding the same bytes (one file per
    array, packed as the callbacks pack them: memory-mapped), as they saved before (``FrameworkCheckpoints.save``:
    the tier's ``save``) and as they save now (``save_periodic``: its ``save_async``), twice each (the second is
    the steady one): ``last_blocked_seconds``, and when each generation counted, from the call."""
    from spotgpu.integrations._generations import FrameworkCheckpoints, pack_files

    directory.mkdir(parents=True, exist_ok=True)
    for key, value in state.items():
        value.tofile(directory / f"{key}.bin")
    files = sorted(f"{key}.bin" for key in state)
    checkpoints = FrameworkCheckpoints(mgr)
    out: dict[str, Any] = {}
    for step, call in ((1, "save"), (2, "save"), (3, "save_periodic"), (4, "save_periodic")):
        dist.barrier()
        t0 = time.perf_counter()
        result = getattr(checkpoints, call)(step, pack_files(directory, files))
        blocked = checkpoints.last_blocked_seconds
        if call == "save_periodic":
            result.wait()
        out[f"{call} #{step}"] = {"blocked": blocked, "counted": time.perf_counter() - t0,
                                  "phases": dict(mgr.last_save_phases)}  # fmt: skip
    mgr.close(60)
    shutil.rmtree(directory, ignore_errors=True)
    return out


def _raw_read(root: Path, drop: bool) -> dict[str, Any]:
    """The baseline: the same files read sequentially into fresh buffers, no hashing, no planning."""
    if drop:
        _drop_cache(root)
    files = [p for p in root.rglob("*") if p.is_file()]
    t0 = time.perf_counter()
    total = 0
    for path in files:
        buffer = np.empty(path.stat().st_size, dtype=np.uint8)
        with open(path, "rb", buffering=0) as handle:
            total += handle.readinto(memoryview(buffer))
    return {"seconds": time.perf_counter() - t0, "source": "raw read", "bytes": total}


def io_part(gib: float, world: int, media: dict[str, str]) -> list[dict[str, Any]]:
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    from tests.checkpoint.ckpt_gloo import free_port

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    root = Path(tempfile.mkdtemp(prefix="spotgpu-recovery-"))
    try:
        endpoint = f"http://127.0.0.1:{port}"
        creds = {"aws_access_key_id": "t", "aws_secret_access_key": "t", "region_name": "us-east-1"}
        boto3.client("s3", endpoint_url=endpoint, **creds).create_bucket(Bucket="ckpt")
        s3 = {"endpoint": endpoint, "access_key_id": "t", "secret_access_key": "t", "region": "us-east-1",
              "client_options": {"allow_http": True}}  # fmt: skip
        ctx = mp.get_context("spawn")
        gloo = free_port()
        procs = [ctx.Process(target=_rank, args=(r, world, gloo, str(root), gib, s3, media)) for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(3600)
        codes = [p.exitcode for p in procs]
        if codes != [0] * world:
            raise SystemExit(f"ranks exited {codes}")
        return [json.loads((root / f"result-r{r}.json").read_text()) for r in range(world)]
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


MEDIA_NOTES = {"ramdisk": "RAM disk (tmpfs: the tier on a type without NVMe)",
               "disk": "this machine's disk, page cache dropped before each read (a cold disk)"}  # fmt: skip


def render_io(results: list[dict[str, Any]], gib: float) -> str:
    lines = [f"Restore of one {gib:g} GiB shard per rank ({len(results)} gloo ranks; moto S3 on loopback serves "
             "from memory; ratio = store seconds / this source's seconds)",
             f"  {'rank':<5}{'tier medium':<13}{'source':<9}{'seconds':>9}{'GiB/s':>8}{'vs store':>10}"]
    for rank, r in enumerate(results):
        store = r["store"]
        for medium, m in r["media"].items():
            for x in (m["raw"], m["local"], m["peer"]):
                lines.append(f"  {rank:<5}{medium:<13}{x['source']:<9}{x['seconds']:>9.3f}"
                             f"{x['bytes'] / GIB / x['seconds']:>8.2f}{store['seconds'] / x['seconds']:>9.1f}x")
        lines.append(f"  {rank:<5}{'-':<13}{store['source']:<9}{store['seconds']:>9.3f}"
                     f"{store['bytes'] / GIB / store['seconds']:>8.2f}{1.0:>9.1f}x")
    lines += ["  media: " + "; ".join(f"{k}: {MEDIA_NOTES.get(k, k)}" for k in results[0]["media"]), ""]
    lines.append("Training blocked per periodic save (seconds; ratio = store only's save / this one)")
    lines.append(f"  {'rank':<5}{'tier medium':<13}{'call':<28}{'blocked':>9}{'counted':>9}{'ratio':>8}   steps of the local commit")
    for rank, r in enumerate(results):
        base = r["blockedStore"]
        for medium, m in r["media"].items():
            steps = ", ".join(f"{k} {v:.2f}" for k, v in m["phases"].items())
            lines.append(f"  {rank:<5}{medium:<13}{'tiered save (first)':<28}{m['blocked']:>9.2f}{m['blocked']:>9.2f}"
                         f"{base / m['blocked']:>7.1f}x   {steps}")
            rows = [(f"tiered {c}", b) for c, b in m["background"].items()]
            rows += [(f"callback {c}", b) for c, b in m["callback"].items()]
            for call, b in rows:
                steps = ", ".join(f"{k} {v:.2f}" for k, v in b["phases"].items())
                lines.append(f"  {rank:<5}{medium:<13}{call:<28}{b['blocked']:>9.2f}{b['counted']:>9.2f}"
                             f"{base / b['blocked']:>7.1f}x   {steps}")
        a = r["storeAsync"]
        lines.append(f"  {rank:<5}{'-':<13}{'store only save':<28}{base:>9.2f}{base:>9.2f}{1.0:>7.1f}x")
        lines.append(f"  {rank:<5}{'-':<13}{'store only save_async':<28}{a['blocked']:>9.2f}{a['counted']:>9.2f}"
                     f"{base / a['blocked']:>7.1f}x")
    lines.append("  blocked: the call held the training thread; counted: the generation counts (tiered: every rank's "
                 "local write and peer copies verified; store: committed), from the call")
    return "\n".join(lines)


# --- part 3: the traces --------------------------------------------------------------------------
def traces_part(starts_every: int) -> str:
    from spotgpu.economics.cost import effective_cost
    from spotgpu.economics.interval import choose_interval
    from spotgpu.economics.tiers import default_joint_loss, pool_joint_loss
    from spotgpu.models.tiers import CheckpointTiers
    from spotgpu.project import load_stack
    from spotgpu.simulation.ladder import ControllerLadder
    from spotgpu.simulation.twin import TwinCloud, run_twin, twin_job_for, twin_plan
    from spotgpu.traces import load_group

    config = load_stack("prod", ROOT)
    tiers = CheckpointTiers.model_validate({"local": {"keep": 2}, "peerCopies": 1})
    lines = ["Cost model per prod pool (workload llm-finetune; with tiers: keep 2, one peer copy across the pool's "
             "zones, prior figures)",
             f"  {'pool':<11}{'tiers':<7}{'T_local s':>10}{'T_store s':>10}{'lost s/int':>11}{'spot $':>9}"
             f"{'lost $':>8}{'ckpt I/O $':>11}{'restores local/peer/store':>27}"]
    for pool in config.pools:
        # the shipped prod workload keeps tiers: "none" is it without them, "on" it with the bench's own
        plain = config.workload_for(pool).model_copy(update={"checkpoint_tiers": None})
        for label, workload in (("none", plain), ("on", plain.model_copy(update={"checkpoint_tiers": tiers}))):
            d = choose_interval(workload, pool.notice, joint_loss=pool_joint_loss(workload, len(pool.zones)))
            bill = effective_cost(workload, pool.notice, config.ladder_for(pool), interval=d,
                                  keep_generations=pool.checkpoint.keep_generations)  # fmt: skip
            lost = bill.term("lost_compute").inputs["lost_seconds_per_interruption"]
            t = d.tiers
            mix = "-" if t is None else f"{t.mix.local:.0%}/{t.mix.peer:.0%}/{t.mix.store:.0%} (q {t.q:.1%})"
            lines.append(f"  {pool.name:<11}{label:<7}{d.seconds:>10}{t.durable_seconds if t else d.seconds:>10}"
                         f"{lost:>11.0f}{bill.spot_total:>9.2f}{bill.term('lost_compute').usd:>8.2f}"
                         f"{bill.term('checkpoint_storage_io').usd:>11.2f}{mix:>27}")  # fmt: skip
    # the twin: the AWS pool's ladder on the 16-node traces, a gang in one zone
    pool = next(p for p in config.pools if p.cloud == "aws")
    traces = load_group("16-node/aws-08-27-2023")
    zones, gap = [t.zone for t in traces], traces[0].gap_seconds
    ticks = min(len(t.data) for t in traces)
    plain = config.workload_for(pool).model_copy(update={"checkpoint_tiers": None})
    nodes = plain.nodes
    lines += ["", f"Twin: {pool.name}'s ladder on 16-node/aws-08-27-2023 (a start every {starts_every} ticks in each "
              "zone). one zone: a spot group per zone, the gang in its home zone, so its peer copies too; regional: "
              "the pool as deployed, one spot group over the zones, the gang spread over them, peers across them. "
              "Restores after interruptions (the model's mix per interruption beside them) and after the controller "
              "moved the job (drained: its final checkpoint in the store)",
              f"  {'placement':<10}{'tiers':<7}{'jobs':>5}{'gang losses':>12}{'lost h/job':>11}{'lost s/loss':>12}"
              f"{'cost $/job':>11}{'after interruptions l/p/s':>27}{'shares':>16}{'model':>16}{'after moves':>13}"]
    rows = [np.ascontiguousarray(t.data) for t in traces]
    for placement in ("one zone", "regional"):
        across = placement == "regional"
        ladder = ControllerLadder(config.ladder_for(pool), regional=across)  # its groups and their traces
        for label, workload in (("none", plain), ("on", plain.model_copy(update={"checkpoint_tiers": tiers}))):
            d = choose_interval(workload, pool.notice, joint_loss=default_joint_loss(nodes, 1, across))
            results = []
            for start in range(0, ticks - 200, starts_every):
                for home in range(len(zones)):
                    groups, given = ladder.groups(zones, home, workload.nodes, rows)
                    plan = twin_plan(workload, ladder.ladder, groups, start=start * gap, interval_seconds=d.seconds)
                    cloud = TwinCloud(plan, twin_job_for(workload, d.seconds, d.tiers), given, gap, start * gap)
                    results.append(run_twin(plan, cloud, horizon_seconds=3 * workload.work_hours * 3600))
            losses = sum(r.gang_losses for r in results)
            lost = sum(r.lost_work_hours for r in results)
            kinds = ("local", "peer", "store")
            moved = {k: sum(r.moved_restores.get(k, 0) for r in results) for k in kinds}
            restores = {k: sum(r.restores.get(k, 0) for r in results) - moved[k] for k in kinds}
            total = sum(restores.values())
            mix = shares = model = after_moves = "-"
            if d.tiers is not None and total:
                mix = "/".join(str(restores[k]) for k in kinds)
                shares = "/".join(f"{restores[k] / total:.0%}" for k in kinds)
                model = "/".join(f"{getattr(d.tiers.mix, k):.0%}" for k in kinds)
                after_moves = "/".join(str(moved[k]) for k in kinds)
            lines.append(f"  {placement:<10}{label:<7}{len(results):>5}{losses:>12}{lost / len(results):>11.3f}"
                         f"{lost * 3600 / max(losses, 1):>12.0f}{np.mean([r.cost_usd for r in results]):>11.2f}{mix:>27}"
                         f"{shares:>16}{model:>16}{after_moves:>13}")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0, help="GiB per rank (default 1)")
    parser.add_argument("--ranks", type=int, default=2, help="gloo ranks, one node each (default 2)")
    parser.add_argument("--skip-io", action="store_true", help="only the trace-driven part")
    parser.add_argument("--ramdisk", default="/dev/shm", help="a tmpfs for the RAM-disk tier (default /dev/shm)")
    parser.add_argument("--disk", default=tempfile.gettempdir(), help="a directory on disk for the disk tier")
    parser.add_argument("--start-every", type=int, default=200, help="twin: a job start every N ticks (default 200)")
    args = parser.parse_args()
    if not args.skip_io:
        media = {"ramdisk": args.ramdisk, "disk": args.disk}
        print(render_io(io_part(args.gib, args.ranks, media), args.gib), flush=True)
        print()
    print(traces_part(args.start_every))


if __name__ == "__main__":
    main()
