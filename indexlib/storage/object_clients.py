"""The :class:`~indexlib.storage.object_store.ObjectClient` of each object store, through ``obstore`` (the Python
binding of the Rust ``object_store`` crate, which delta-rs, the audit table's writer, uses too: the same storage
options and ``AWS_*`` / ``GOOGLE_*`` / ``AZURE_*`` environment variables configure both). Of those compared
(``benchmarks/object_storage.py``: pyarrow.fs, fsspec/s3fs) it holds the least memory, reads whole small objects
fastest (one GET each) and sends conditional ranged reads (If-Match) on any read, so a replaced object is told
(pyarrow.fs cannot; s3fs only through its file object); installed by the ``object-storage`` extra. Its client is
not fork-safe: a pool over object storage starts its workers from a fork server (``engine.pool``).

Every failure becomes one :class:`~indexlib.storage.store.ObjectStoreError` line naming the URI.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from .object_store import ObjectMeta, split_uri
from .store import ObjectChangedError, ObjectStoreError, StoreSpec

#: the schemes served (``abfs://container@account.dfs.core.windows.net/path`` for Azure)
SCHEMES = ("s3", "s3a", "gs", "abfs", "abfss")

#: bounded retries and timeouts unless the storage options say otherwise: a dead endpoint fails in seconds
DEFAULT_CLIENT_OPTIONS = {"connect_timeout": "5s", "timeout": "30s"}
DEFAULT_RETRY = {"max_retries": 3, "retry_timeout": timedelta(seconds=20)}


def _obstore() -> Any:
    try:
        import obstore
    except ImportError:
        raise ObjectStoreError(
            "reading object storage needs the obstore package: pip install 'kafka-index-rebuild[object-storage]'"
        ) from None
    return obstore


class ObstoreClient:
    """One bucket (``scheme://bucket``) through ``obstore``. Storage options are the spec's (``--storage-option``),
    over the environment's."""

    def __init__(self, spec: StoreSpec, bucket: str) -> None:
        obstore = _obstore()
        from obstore.store import from_url

        make: Any = from_url  # its overloads are per scheme; the scheme is known only at run time
        self.root = f"{spec.scheme}://{bucket}"
        self._obstore = obstore
        options = dict(spec.options)
        client_options: dict[str, Any] = dict(DEFAULT_CLIENT_OPTIONS)
        if "AWS_ALLOW_HTTP" in os.environ:  # as delta-rs takes it (obstore reads only the AWS_* keys of a store)
            client_options["allow_http"] = os.environ["AWS_ALLOW_HTTP"]
        for key in ("allow_http", "AWS_ALLOW_HTTP", "timeout", "connect_timeout"):
            if key in options:  # client options, not the store's: obstore refuses them among the store's keys
                client_options[key.lower().removeprefix("aws_")] = options.pop(key)
        try:
            self.store = make(
                self.root, config=options or None, client_options=client_options, retry_config=DEFAULT_RETRY
            )
        except Exception as exc:  # an unknown option, a malformed URL
            raise ObjectStoreError(f"{self.root}: {_line(exc)}") from None

    def _fail(self, key: str, exc: Exception) -> ObjectStoreError:
        uri = f"{self.root}/{key}"
        if isinstance(exc, self._obstore.exceptions.PreconditionError):
            return ObjectChangedError(f"{uri}: the object changed while it was read")
        return ObjectStoreError(f"{uri}: {_line(exc)}")

    def list(self, prefix: str) -> Iterator[tuple[str, int]]:
        try:
            for batch in self._obstore.list(self.store, prefix=prefix or None, chunk_size=1000):
                for meta in batch:
                    yield meta["path"], int(meta["size"])
        except Exception as exc:
            raise self._fail(prefix, exc) from None

    def head(self, key: str) -> ObjectMeta | None:
        try:
            meta = self._obstore.head(self.store, key)
        except (FileNotFoundError, self._obstore.exceptions.NotFoundError):  # obstore raises the builtin one
            return None
        except Exception as exc:
            raise self._fail(key, exc) from None
        return ObjectMeta(int(meta["size"]), meta.get("e_tag") or "")

    def get(self, key: str) -> bytes | None:
        try:
            return bytes(self._obstore.get(self.store, key).bytes())
        except (FileNotFoundError, self._obstore.exceptions.NotFoundError):  # obstore raises the builtin one
            return None
        except Exception as exc:
            raise self._fail(key, exc) from None

    def get_range(self, key: str, start: int, end: int, version: str) -> bytes:
        if end <= start:
            return b""
        options: dict[str, Any] = {"range": (start, end)}
        if version:
            options["if_match"] = version
        try:
            return bytes(self._obstore.get(self.store, key, options=options).bytes())
        except Exception as exc:
            raise self._fail(key, exc) from None

    def get_head(self, key: str, end: int) -> tuple[bytes, ObjectMeta] | None:
        try:
            got = self._obstore.get(self.store, key, options={"range": (0, end)})
            return bytes(got.bytes()), ObjectMeta(int(got.meta["size"]), got.meta.get("e_tag") or "")
        except (FileNotFoundError, self._obstore.exceptions.NotFoundError):  # obstore raises the builtin one
            return None
        except Exception as exc:
            if "InvalidRange" not in str(exc):
                raise self._fail(key, exc) from None
        meta = self.head(key)  # an empty object: no range of it is satisfiable
        return None if meta is None else (b"", meta)

    def put(self, key: str, data: bytes) -> None:
        try:
            self._obstore.put(self.store, key, data)
        except Exception as exc:
            raise self._fail(key, exc) from None

    def copy(self, source: str, target: str) -> None:
        try:
            self._obstore.copy(self.store, source, target)
        except Exception as exc:
            raise self._fail(source, exc) from None

    def delete(self, key: str) -> None:
        try:
            self._obstore.delete(self.store, key)
        except (FileNotFoundError, self._obstore.exceptions.NotFoundError):
            return
        except Exception as exc:
            raise self._fail(key, exc) from None


_SERVICE_ERROR = re.compile(r"<Code>([^<]*)</Code>\s*<Message>([^<]*)</Message>")
_ELAPSED = re.compile(r" in [0-9.]+[mµn]?s\b")


def _line(exc: BaseException) -> str:
    """An obstore error as one line: its first line, which names the operation and the cause, with the service's
    own error code and message in place of the XML body it quotes (``InvalidAccessKeyId: ...``)."""
    text = str(exc).strip() or type(exc).__name__
    line = _ELAPSED.sub("", text.splitlines()[0].split("<?xml", 1)[0]).rstrip(": ")
    service = _SERVICE_ERROR.search(text)
    if service is not None:
        line += f": {service.group(1)}: {service.group(2)}"
    elif "kind: Timeout" in text:  # said only in the error's debug text
        line += " (timed out; the storage options timeout and connect_timeout set how long)"
    return " ".join(line.split())


def object_client(spec: StoreSpec, uri: str) -> ObstoreClient:
    scheme, bucket, _ = split_uri(uri)
    if scheme not in SCHEMES:
        raise ObjectStoreError(f"{uri}: no object store for {scheme}:// (served: {', '.join(SCHEMES)})")
    return ObstoreClient(spec, bucket)
