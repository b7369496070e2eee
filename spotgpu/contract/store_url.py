"""Store URLs, one dialect per cloud: the contract's name for :mod:`spotgpu.storage.urls`.

The parser lives with the stores that open the URLs (``spotgpu.storage``, below the contract),
so the contract's state store and the checkpoint library share it without the storage layer
importing the contract. Parts keep importing the forms from here.
"""

from spotgpu.storage.urls import FORMS, SCHEME_CLOUDS, StoreUrl, bad_url, parse_store_url, redact_url

__all__ = ["FORMS", "SCHEME_CLOUDS", "StoreUrl", "bad_url", "parse_store_url", "redact_url"]
