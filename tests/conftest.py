"""Loopback servers every test folder may use (each folder keeps its own conftest for the rest).

moto (S3, EC2, Auto Scaling, SQS, FIS) and Azurite (Blob) bind 127.0.0.1 on a random free port
and are shut down at the end. Azurite comes from npm (``./run test`` installs it into
.cache/node); a missing Azurite FAILS the Blob tests with the fix, it does not skip them,
because CI always installs it.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]

#: Under CI (``CI=true``, as ``.ci/run`` runs) hypothesis draws the same examples every run, so a
#: run that fails fails again on the same commit and a passing commit lands; a developer's run
#: draws new ones each time and finds what CI's fixed set does not (then pin it with @example).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE_ACCOUNT = "devstoreaccount1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[dict[str, Any]]:
    """moto's S3 on loopback; yields obstore options for s3:// URLs."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
        boto3.client("s3", endpoint_url=endpoint, **creds).create_bucket(Bucket="ckpt")
        yield {
            "endpoint": endpoint,
            "access_key_id": "testing",
            "secret_access_key": "testing",
            "region": "us-east-1",
            "client_options": {"allow_http": True},
            "retry_config": {"max_retries": 2},
        }
    finally:
        server.stop()


def azurite_bin() -> str:
    explicit = os.environ.get("SPOTGPU_AZURITE_BIN")
    candidates = [explicit] if explicit else [str(REPO / ".cache/node/node_modules/.bin/azurite-blob")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(
        f"Azurite not found (SPOTGPU_AZURITE_BIN={explicit!r}, looked in {candidates}); fix: run ./run test, or "
        "mkdir -p .cache/node && cp tools/azurite/package*.json .cache/node/ && (cd .cache/node && npm ci)",
        pytrace=False,
    )


def stop_process(proc: subprocess.Popen[bytes], workdir: Path) -> None:
    """Stop a server this suite started (by its own handle), then remove its working folder."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Azurite's Blob service on loopback; yields obstore options for az:// URLs."""
    from azure.storage.blob import BlobServiceClient

    binary = azurite_bin()
    port = free_port()
    workdir = tmp_path_factory.mktemp("azurite")
    proc = subprocess.Popen(
        [
            binary,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--inMemoryPersistence",
            "--disableTelemetry",
            "--skipApiVersionCheck",
            "--silent",
        ],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, 60, proc)
        endpoint = f"http://127.0.0.1:{port}"
        conn = (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};"
        )
        BlobServiceClient.from_connection_string(conn).create_container("ckpt")
        # obstore's emulator mode reads the Azurite URL from this variable.
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("AZURITE_BLOB_STORAGE_URL", endpoint)
            yield {
                "account_name": AZURITE_ACCOUNT,
                "account_key": AZURITE_KEY,
                "use_emulator": True,
                "client_options": {"allow_http": True},
                "retry_config": {"max_retries": 2},
            }
    finally:
        stop_process(proc, workdir)




@pytest.fixture(scope="module")
def azurite_queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Azurite's Queue service on loopback: the far end of Azure's Event Grid -> Storage queue path.

    Yields the account's queue service URL and credential. ``azurite-queue`` ships beside
    ``azurite-blob`` in the same npm package.
    """
    binary = str(Path(azurite_bin()).with_name("azurite-queue"))
    port = free_port()
    workdir = tmp_path_factory.mktemp("azurite-queue")
    proc = subprocess.Popen(
        [binary, "--queueHost", "127.0.0.1", "--queuePort", str(port), "--inMemoryPersistence",
         "--disableTelemetry", "--skipApiVersionCheck", "--silent"],
        cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_for_port(port, 60, proc)
        yield {"url": f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}", "account_name": AZURITE_ACCOUNT,
               "account_key": AZURITE_KEY}  # fmt: skip
    finally:
        stop_process(proc, workdir)


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """moto's server (EC2, Auto Scaling, SQS, S3, FIS, ...) on a free loopback port, for one test module."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


#: Threads the project's own servers and workers run on (spotgpu.agent, spotgpu.checkpoint, the fake
#: metadata servers of spotgpu.agent.fakes, named after their class).
OWN_THREADS = re.compile(r"^(control|controller-link|identity|responder|spotgpu-.+|Fake\w+)$")


def threads_left(before: set[int | None], grace: float = 3.0) -> list[str]:
    """Names of project threads started since ``before`` that are still alive after ``grace`` s."""
    deadline = time.monotonic() + grace
    while True:
        left = [t.name for t in threading.enumerate()
                if t.ident not in before and t.is_alive() and OWN_THREADS.match(t.name)]
        if not left or time.monotonic() >= deadline:
            return sorted(left)
        time.sleep(0.05)


@pytest.fixture(autouse=True, scope="module")
def _every_server_a_module_starts_is_stopped_by_it() -> Iterator[None]:
    """A server left running by one test answers (or prints into) another test's run: every agent,
    control server and fake metadata server a test module starts must be stopped by its fixtures'
    finalizers. Checked per module, after its module-scoped fixtures are torn down."""
    before = {t.ident for t in threading.enumerate()}
    yield
    left = threads_left(before)
    if left:
        pytest.fail(f"this module left project threads running: {', '.join(left)}; fix: stop them in a fixture "
                    "finalizer (yield, then .stop())", pytrace=False)

