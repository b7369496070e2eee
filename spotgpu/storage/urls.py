"""Store URLs, parsed once: the one dialect per cloud that pools export, and every part opens as is.

The checkpoint library, the controller's state store, the node agent, the bootstrap and
the policy pack all read a pool's ``spotgpu-checkpoint-store`` link through
:func:`parse_store_url`, so an Azure URL means the same account, container and prefix
everywhere (``az://ACCOUNT/CONTAINER/PREFIX``). It lives with the stores that open the URLs;
the parts import it from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

#: The cloud each object-store scheme belongs to.
SCHEME_CLOUDS = {"s3": "aws", "gs": "gcp", "az": "azure"}


@dataclass(frozen=True)
class StoreUrl:
    """A checkpoint store URL, parsed once (the one parser every part should use).

    Forms (exactly what the pools export, see ``spotgpu.contract.tags.CHECKPOINT_STORE``):

    - ``file:///abs/path`` or a plain path (``/abs/path``, ``rel/path``, ``~/x``);
    - ``s3://BUCKET/PREFIX`` and ``gs://BUCKET/PREFIX``;
    - ``az://ACCOUNT/CONTAINER/PREFIX`` (also ``https://ACCOUNT.blob.core.windows.net/CONTAINER/PREFIX``).

    Credentials never belong in a URL: one is refused, and ``text`` never shows it.
    """

    scheme: str
    #: Bucket (S3, GCS) or container (Azure); empty for file://.
    bucket: str
    #: Key prefix inside the bucket (no leading or trailing '/').
    prefix: str
    #: The storage account (Azure only).
    account: str | None = None
    #: The directory (file:// only).
    path: Path | None = None

    @property
    def text(self) -> str:
        """The canonical URL (what messages show)."""
        if self.path is not None:
            return self.path.as_uri()
        head = f"{self.scheme}://{self.account}/{self.bucket}" if self.account else f"{self.scheme}://{self.bucket}"
        return f"{head}/{self.prefix}" if self.prefix else head

    @property
    def cloud(self) -> str | None:
        """``aws``, ``gcp`` or ``azure``; None for a local directory."""
        return SCHEME_CLOUDS.get(self.scheme)

    @property
    def store_name(self) -> str:
        """The name of the cloud resource that holds the data: the bucket, or Azure's storage account."""
        return self.account or self.bucket

    def obstore_location(self) -> tuple[str, dict[str, str]]:
        """The URL and config obstore's ``from_url`` needs to open the bucket/container."""
        config = {"account_name": self.account} if self.account else {}
        return f"{self.scheme}://{self.bucket}", config


_AZURE_BLOB_HOST = re.compile(r"^([a-z0-9]{3,24})\.blob\.core\.windows\.net$")
FORMS = "file:///abs/path (or a plain path), s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or az://ACCOUNT/CONTAINER/PREFIX"


def redact_url(url: str) -> str:
    """``url`` with any user info (keys, passwords) replaced by ``***``."""
    head, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rsplit("@", 1)[1]
    return f"{head}{sep}{authority}{slash}{tail}"


def bad_url(url: str, problem: str, fix: str) -> ValueError:
    """One line naming the URL (credentials redacted), what is wrong and the fix."""
    return ValueError(f"url: {redact_url(url)!r} {problem}; fix: {fix}")


def parse_store_url(url: str) -> StoreUrl:
    """Parse a store URL or plain path; a bad one is one ValueError line (field, value, fix)."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"url: {url!r} is not a store URL; fix: use {FORMS}")
    if "://" not in url:
        return StoreUrl("file", "", "", path=Path(url).expanduser().resolve())
    parsed = urlparse(url)
    scheme = parsed.scheme.lower()
    if parsed.username is not None or parsed.password is not None or "@" in parsed.netloc:
        raise bad_url(
            url,
            "has credentials in it",
            "drop them from the URL and pass them as store options or the usual environment variables "
            "(AWS_*, GOOGLE_*, AZURE_STORAGE_*)",
        )
    path = unquote(parsed.path)
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise bad_url(url, f"has host {parsed.netloc!r}", "use file:///absolute/path")
        return StoreUrl("file", "", "", path=Path(path))
    segments = [p for p in path.split("/") if p]
    if scheme == "https" and (m := _AZURE_BLOB_HOST.match(parsed.netloc.lower())):
        scheme, account = "az", m.group(1)
    elif scheme == "az":
        account = parsed.netloc
    elif scheme in ("s3", "gs"):
        if not parsed.netloc:
            raise bad_url(url, "has no bucket", f"use {scheme}://BUCKET/PREFIX")
        return StoreUrl(scheme, parsed.netloc, "/".join(segments))
    else:
        raise bad_url(url, f"has scheme {parsed.scheme!r}", f"use {FORMS}")
    if not account or not segments:
        raise bad_url(url, "does not name a storage account and a container", "use az://ACCOUNT/CONTAINER/PREFIX")
    return StoreUrl("az", segments[0], "/".join(segments[1:]), account=account)
