"""Large values as files in a folder: by default `blobs/` beside the embedded server's state.

A value is kept under `NAMESPACE/RUN_ID/SHA256.payload`: one folder per run, so a run's values can
be removed with it, and the same bytes in one run are written once. What history keeps is the
relative key (read against this machine's folder, wherever it is mounted), with the absolute file
and the size for people reading it in Temporal Web.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from agentrun.worker.blobs.errors import BlobUnreadable
from agentrun.worker.blobs.size import size_text

NAME = "agentrun.folder"
SUFFIX = ".payload"


class FolderDriver(StorageDriver):
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def name(self) -> str:
        return NAME

    def type(self) -> str:
        return NAME

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        # File writes off the event loop: a worker's loop also runs its workflows' activations.
        return await asyncio.gather(*(asyncio.to_thread(self._store, _owner(context), p) for p in payloads))

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return await asyncio.gather(*(asyncio.to_thread(self._retrieve, c) for c in claims))

    def _store(self, owner: str, payload: Payload) -> StorageDriverClaim:
        data = payload.SerializeToString()
        key = f"{owner}/{hashlib.sha256(data).hexdigest()}{SUFFIX}"
        path = self.folder / key
        if not path.exists():
            _write(path, data)
        return StorageDriverClaim(claim_data={"size": size_text(len(data)), "file": str(path), "key": key})

    def _retrieve(self, claim: StorageDriverClaim) -> Payload:
        key = claim.claim_data.get("key", "")
        path = self.folder / key
        if not key.endswith(SUFFIX) or not path.resolve().is_relative_to(self.folder.resolve()):
            raise BlobUnreadable(f"the large value reference {key!r} does not name a file of the folder {self.folder}")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise BlobUnreadable(
                f"the large value {path} cannot be read ({exc.strerror})\n  hint: {self._where(claim)}"
            ) from None
        if hashlib.sha256(data).hexdigest() != path.name.removesuffix(SUFFIX):
            raise BlobUnreadable(f"the large value {path} has changed since it was written")
        payload = Payload()
        payload.ParseFromString(data)
        return payload

    def _where(self, claim: StorageDriverClaim) -> str:
        """Where the value was written, when that is not this folder (another machine's, a container's)."""
        file, key = claim.claim_data.get("file", ""), claim.claim_data.get("key", "")
        written = file[: -len(key)].rstrip("/") if key and file.endswith(key) else ""
        if written and Path(written) != self.folder:
            return f"it was written to the folder {written}: set AGENTRUN_BLOB_URL={written}, or mount that folder here"
        return (
            "it was removed from this folder, or the worker writes to another one "
            "(AGENTRUN_BLOB_URL, AGENTRUN_STATE_DIR): a removed value cannot be brought back"
        )


def _owner(context: StorageDriverStoreContext) -> str:
    """`NAMESPACE/RUN_ID` of the run the value belongs to (activities store under their run too)."""
    target = context.target
    namespace = _segment(target.namespace if target else None)
    return f"{namespace}/{_segment(target.id if target else None)}"


def _segment(text: str | None) -> str:
    """One path segment, whatever the id holds: `/` and the like escaped, `.`/`..` never a step up."""
    segment = quote(text or "", safe="")
    return segment if segment.strip(".") else (segment.replace(".", "%2E") or "null")


def _write(path: Path, data: bytes) -> None:
    """Write whole or not at all: a reader never sees half a file, even with two workers writing it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
