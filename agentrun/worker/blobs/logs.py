"""Conversation logs (agentrun.activities.threads) in the store large values go to: one entry a
message, at `NAMESPACE/WORKFLOW_ID/conversations/LOG/INDEX.json` (in S3, under the URL's prefix). In
a folder that is inside the run's folder of values, so removing those removes its conversations."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentrun.worker.blobs.folder import _segment, _write

FOLDER = "conversations"


def _key(owner: str, log: str, index: int) -> str:
    namespace, _, workflow_id = owner.partition("/")
    return f"{_segment(namespace)}/{_segment(workflow_id)}/{FOLDER}/{_segment(log)}/{index}.json"


class FolderLogs:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    async def write(self, owner: str, log: str, start: int, entries: list[bytes]) -> None:
        if entries:  # off the event loop, which also runs the worker's workflow tasks
            await asyncio.to_thread(self._write, owner, log, start, entries)

    async def read(self, owner: str, log: str, start: int, stop: int) -> list[bytes]:
        return await asyncio.to_thread(self._read, owner, log, start, stop)

    def _write(self, owner: str, log: str, start: int, entries: list[bytes]) -> None:
        for n, data in enumerate(entries, start):
            _write(self.folder / _key(owner, log, n), data)

    def _read(self, owner: str, log: str, start: int, stop: int) -> list[bytes]:
        return [(self.folder / _key(owner, log, n)).read_bytes() for n in range(start, stop)]


class S3Logs:
    """In the bucket and under the prefix of AGENTRUN_BLOB_URL, through the S3 client values use."""

    PARALLEL = 16  # requests at once

    def __init__(self, client: Any, bucket: str, prefix: str) -> None:
        self.client, self.bucket, self.prefix = client, bucket, prefix

    async def write(self, owner: str, log: str, start: int, entries: list[bytes]) -> None:
        await self._each(
            self.client.put_object(bucket=self.bucket, key=_key(owner, log, n), data=data)
            for n, data in enumerate(entries, start)
        )

    async def read(self, owner: str, log: str, start: int, stop: int) -> list[bytes]:
        # put_object adds the prefix to a key; get_object takes the whole key.
        return await self._each(self._get(self.prefix + _key(owner, log, n)) for n in range(start, stop))

    async def _get(self, key: str) -> bytes:
        try:
            return await self.client.get_object(bucket=self.bucket, key=key)
        except Exception as exc:  # botocore's ClientError, which this module does not import
            if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise KeyError(f"s3://{self.bucket}/{key} is not there") from None
            raise

    async def _each(self, requests: Any) -> list[Any]:
        limit = asyncio.Semaphore(self.PARALLEL)

        async def one(request: Any) -> Any:
            async with limit:
                return await request

        return list(await asyncio.gather(*(one(r) for r in requests)))
