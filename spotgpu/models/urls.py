"""URL-typed config fields: one rule at the config edge, no credentials in any of them.

A field that holds a URL, or text that carries one (a pip requirement with a direct URL, an
image reference, a store URL, an endpoint), is copied into places anyone with read access
sees: a GCP instance template's metadata in plain text, an AWS launch template's userData
(base64 is not encryption), Pulumi state, CI logs, the preview's JSON. So user info in a URL
(``https://deploy:TOKEN@host/...``) is refused here, for every such field, with the value shown
redacted (``https://***@host/...``) and a fix naming the mechanism that fits the field:

- a package (``agentPackage``): a pip index whose credentials the VM gets from a keyring or its
  own identity, never from the requirement;
- an image (``controller.image``): the job's own identity with pull rights on the registry;
- a store URL (checkpoint store, controller ``stateUrl``): the instance role, service account or
  managed identity, or the SDKs' environment variables;
- an endpoint (metadata URL, queue URL): the instance role; a token the program itself needs
  goes in Pulumi secret config (``pulumi config set --secret``).

Then each kind is checked for its own form: :data:`PackageRequirement` parses as a pip
requirement or a wheel URL (pip would fail on every boot otherwise), :data:`ImageReference`
as a container image reference (``[registry[:port]/]path[:tag][@digest]``, no scheme).
"""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from pydantic import AfterValidator

from spotgpu.models.base import FieldProblem

#: ``scheme://userinfo@`` anywhere in a text: userinfo is what precedes '@' in the authority.
URL_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#@\s]+)@")
#: Schemes whose user name alone is no secret (``git+ssh://git@github.com/...`` authenticates by key).
_NAME_ONLY_OK = ("ssh", "git+ssh")

PACKAGE_FIX = (
    "publish the wheel to a pip index the VMs reach with their own credentials (a keyring: AWS CodeArtifact, "
    "keyrings.google-artifactregistry-auth, artifacts-keyring; or pip.conf baked into the image) and name it "
    "without them, e.g. spotgpu[aws]==0.1.0, or serve the wheel from a bucket the instance role reads"
)
IMAGE_FIX = (
    "give the plain reference (registry/path:tag) and let the job pull with its own identity (the controller "
    "job's service account with Artifact Registry Reader, or its managed identity with AcrPull)"
)
STORE_FIX = (
    "drop them from the URL: the instance role (AWS), service account (GCP) or managed identity (Azure) gives "
    "access, or the SDKs' environment variables (AWS_*, GOOGLE_*, AZURE_STORAGE_*) on the machine"
)
VM_IMAGE_FIX = (
    "give the image's self link or family path without them: the deploying identity reads the image (grant it "
    "roles/compute.imageUser on the image's project)"
)
ENDPOINT_FIX = (
    "drop them from the URL: the endpoint is reached with the instance role or service identity; a token the "
    "program itself needs goes in Pulumi secret config (`pulumi config set --secret`)"
)


def credentials_in(text: str) -> bool:
    """True when a URL in ``text`` carries user info that is a secret (``user:password@``, ``TOKEN@``)."""
    for match in URL_USERINFO.finditer(text):
        scheme = match.group("head")[:-3].lower()
        if ":" in match.group("userinfo") or scheme not in _NAME_ONLY_OK:
            return True
    return False


def redact(text: str) -> str:
    """``text`` with the user info of every URL in it replaced by ``***`` (for messages and logs)."""
    return URL_USERINFO.sub(lambda m: f"{m.group('head')}***@", text)


def refuse_credentials(value: str, fix: str) -> str:
    if credentials_in(value):
        raise FieldProblem("carries credentials in a URL, which would reach boot data, state and logs in plain "
                           "text", value=redact(value), fix=fix)  # fmt: skip
    return value


def _no_credentials(fix: str) -> AfterValidator:
    return AfterValidator(lambda value: value if not isinstance(value, str) else refuse_credentials(value, fix))


def check_package(value: str) -> str:
    """A pip requirement (``spotgpu[aws]==0.1.0``, ``spotgpu[aws] @ https://.../x.whl``) or a wheel's URL or path."""
    refuse_credentials(value, PACKAGE_FIX)
    try:
        req = Requirement(value)
    except InvalidRequirement:
        req = None
    if req is not None:
        if req.url is not None and urlsplit(req.url).scheme not in ("https", "http", "file") and "+" not in req.url.split(":")[0]:
            raise FieldProblem("names a URL pip cannot fetch", value=value,
                               fix="use an https:// or file:// URL of the wheel, or a VCS URL (git+https://...)")  # fmt: skip
        return value
    location = urlsplit(value).path if "://" in value else value
    try:
        if "://" in value and urlsplit(value).scheme not in ("https", "http", "file"):
            raise InvalidWheelFilename(value)
        if not (location.startswith("/") or "://" in value) or any(c.isspace() for c in value):
            raise InvalidWheelFilename(value)
        parse_wheel_filename(location.rsplit("/", 1)[-1])
    except InvalidWheelFilename:
        raise FieldProblem(
            "is neither a pip requirement nor a wheel's URL, so pip would fail on every boot", value=value,
            fix="give a requirement (spotgpu[aws]==0.1.0, or spotgpu[aws] @ https://host/spotgpu-0.1.0-py3-none-any.whl) "
                "or the URL of a wheel file (https://host/spotgpu-0.1.0-py3-none-any.whl)",
        ) from None  # fmt: skip
    return value


#: ``[registry[:port]/]path[/path...][:tag][@sha256:hex]``, the distribution spec's reference grammar.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?"
_IMAGE = re.compile(
    rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{{32,}})?$"
)


def check_image(value: str) -> str:
    """A container image reference, as ``docker pull`` and the clouds' job APIs take it."""
    refuse_credentials(value, IMAGE_FIX)
    if len(value) > 255 or not _IMAGE.match(value):
        hint = "; an image reference has no scheme" if "://" in value else ""
        raise FieldProblem(f"is not a container image reference{hint}", value=value,
                           fix="give registry/path:tag, e.g. us-docker.pkg.dev/PROJECT/spotgpu/controller:0.1.0")  # fmt: skip
    return value


#: ``agentPackage``: what the bootstrap hands ``pip install`` on every VM.
PackageRequirement = Annotated[str, AfterValidator(check_package)]
#: ``controller.image``: a container image reference.
ImageReference = Annotated[str, AfterValidator(check_image)]
#: A checkpoint store or controller record URL (the storage layer parses its form).
StoreUrlText = Annotated[str, _no_credentials(STORE_FIX)]
#: An HTTP endpoint (metadata server, queue).
EndpointUrl = Annotated[str, _no_credentials(ENDPOINT_FIX)]
#: An argument of a command the VMs' boot data starts (a gang's training command: ``--ckpt s3://...``).
CommandArgument = Annotated[str, _no_credentials(ENDPOINT_FIX)]
#: A VM image's self link or id (its form is checked elsewhere), refused only with credentials.
NO_CREDENTIALS_IN_VM_IMAGE = _no_credentials(VM_IMAGE_FIX)
