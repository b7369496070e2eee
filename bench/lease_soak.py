"""Soak of the controller lease: two processes on one record, many ticks, on moto S3 and Azurite.

    PYTHONPATH=$PWD:$PWD/policies .venv/bin/python bench/lease_soak.py --ticks 2000

The suite runs 200 ticks per process (tests/controller/test_lease_two_processes.py);
this runs the same workers and the same checks for longer, and prints a table of
what happened next to a baseline: one process alone on the same store and the same
random pauses. The ratio is acting ticks per second with two contenders over the
baseline's: what a second controller costs the one that holds the lease.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "controller")]

from lease_worker import RECORD, run_worker  # noqa: E402

from spotgpu.contract.state_store import ObjectJsonStore  # noqa: E402


def _servers(stack: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    import boto3
    from moto.server import ThreadedMotoServer

    from tests.checkpoint.conftest import AZURITE_ACCOUNT, AZURITE_KEY, azurite_bin, free_port, wait_for_port

    port = free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    stack.append(moto.stop)
    endpoint = f"http://127.0.0.1:{port}"
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="t", aws_secret_access_key="t",
                 region_name="us-east-1").create_bucket(Bucket="ckpt")
    s3 = {"endpoint": endpoint, "access_key_id": "t", "secret_access_key": "t", "region": "us-east-1",
          "client_options": {"allow_http": True}}
    out = {"s3": ("s3://ckpt/soak", s3)}
    try:
        binary = azurite_bin()
    except BaseException:  # pytest.fail outside pytest: no Azurite here
        return out
    import subprocess

    from azure.storage.blob import BlobServiceClient

    aport = free_port()
    workdir = tempfile.mkdtemp()
    proc = subprocess.Popen([binary, "--blobHost", "127.0.0.1", "--blobPort", str(aport), "--inMemoryPersistence",
                             "--disableTelemetry", "--skipApiVersionCheck", "--silent"], cwd=workdir,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stack.append(proc.terminate)
    wait_for_port(aport, 60, proc)
    aendpoint = f"http://127.0.0.1:{aport}"
    conn = (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={aendpoint}/{AZURITE_ACCOUNT};")
    BlobServiceClient.from_connection_string(conn).create_container("ckpt")
    os.environ["AZURITE_BLOB_STORAGE_URL"] = aendpoint
    out["azurite"] = ("az://ckpt/soak", {"account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY,
                                          "use_emulator": True, "client_options": {"allow_http": True}})
    return out


def race(url: str, options: dict[str, Any], ticks: int, workers: int, tmp: Path) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    url = f"{url}-{uuid.uuid4().hex[:6]}/_controller"
    start_at = time.time() + 2.0
    logs, procs = [], []
    for i in range(workers):
        log = tmp / f"{uuid.uuid4().hex}.jsonl"
        logs.append(log)
        kw = {"ticks": ticks, "ttl": 0.25, "skew": 0.05, "seed": 7 + i, "start_at": start_at}
        procs.append(ctx.Process(target=run_worker, args=(chr(97 + i), url, options, str(log)), kwargs=kw))
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    elapsed = time.time() - start_at
    entries = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    record = ObjectJsonStore(url, **options).get(RECORD) or {"counter": 0, "history": []}
    acted = [e for e in entries if e["outcome"] == "acted"]
    tokens = [h[1] for h in record["history"]]
    holders: dict[int, set[str]] = {}
    for name, token, _ in record["history"]:
        holders.setdefault(token, set()).add(name)
    paused = [e for e in entries if e.get("long_pause")]
    ok = (record["counter"] == len(acted) == len(record["history"]) and tokens == sorted(tokens)
          and all(len(h) == 1 for h in holders.values()) and all(e["outcome"] == "write_refused" for e in paused))
    return {"ticks": len(entries), "acted": len(acted), "refused": sum(e["outcome"] == "refused" for e in entries),
            "write_refused": sum(e["outcome"] == "write_refused" for e in entries), "paused": len(paused),
            "tokens": len(holders), "seconds": elapsed, "ok": ok}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ticks", type=int, default=2000)
    args = parser.parse_args()
    stack: list[Any] = []
    try:
        servers = _servers(stack)
        print("| store | case | ticks | acted | refused | write refused | long pauses | tokens | acted/s | ratio | checks |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        with tempfile.TemporaryDirectory() as tmp:
            for store, (url, options) in servers.items():
                base = race(url, options, args.ticks // 4, 1, Path(tmp))
                two = race(url, options, args.ticks, 2, Path(tmp))
                base_rate = base["acted"] / base["seconds"]
                for case, r in (("1 process (baseline)", base), ("2 processes", two)):
                    rate = r["acted"] / r["seconds"]
                    print(f"| {store} | {case} | {r['ticks']} | {r['acted']} | {r['refused']} | {r['write_refused']} | "
                          f"{r['paused']} | {r['tokens']} | {rate:.1f} | {rate / base_rate:.2f} | "
                          f"{'pass' if r['ok'] else 'FAIL'} |")
    finally:
        for stop in reversed(stack):
            stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
