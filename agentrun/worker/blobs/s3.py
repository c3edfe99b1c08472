"""Large values in an S3-compatible store, through the Temporal SDK's S3 driver and aioboto3.

`AGENTRUN_BLOB_URL=s3://BUCKET/PREFIX`; credentials, region and endpoint come from the standard AWS
settings (`AWS_ACCESS_KEY_ID`, `AWS_REGION`, `AWS_ENDPOINT_URL` for MinIO and the like, profiles).
The bucket must exist. aioboto3 is imported only when such a URL is set (`pip install 'agentrun[s3]'`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.converter import (
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from agentrun.worker.blobs.errors import BadBlobSetting, BlobUnreadable
from agentrun.worker.blobs.size import size_text

NAME = "aws.s3driver"  # the SDK driver's, so references stay readable by any SDK configured with it


def driver(bucket: str, prefix: str) -> StorageDriver:
    return Described(S3StorageDriver(client=client(prefix), bucket=bucket, driver_name=NAME), prefix)


def client(prefix: str) -> S3StorageDriverClient:
    """The SDK's S3 client, writing under `prefix`; BadBlobSetting when it is not installed."""
    try:
        import aioboto3
        from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client
    except ImportError as exc:
        raise BadBlobSetting(
            f"AGENTRUN_BLOB_URL names an S3 bucket, but the S3 client is not installed ({exc})\n"
            "  hint: pip install 'agentrun[s3]'"
        ) from None
    return _PrefixedClient(aioboto3.Session(), prefix, new_aioboto3_client)


class Described(StorageDriver):
    """The SDK's S3 driver, with references that say where the value is and how big it is, and that
    hold the whole key (prefix included), so they read the same whatever the prefix is set to later.
    It keeps the SDK driver's name (NAME)."""

    def __init__(self, inner: S3StorageDriver, prefix: str) -> None:
        self.inner, self.prefix = inner, prefix

    def name(self) -> str:
        return self.inner.name()

    def type(self) -> str:
        return self.inner.type()

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        claims = await self.inner.store(context, payloads)
        return [self._described(claim, payload.ByteSize()) for claim, payload in zip(claims, payloads)]

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        try:
            return await self.inner.retrieve(context, claims)
        except (RuntimeError, ValueError) as exc:  # the SDK driver's words name the bucket and key
            cause = f": {exc.__cause__}" if exc.__cause__ else ""
            raise BlobUnreadable(
                f"{exc}{cause}\n  hint: check AGENTRUN_BLOB_URL and the AWS settings (AWS_ENDPOINT_URL, credentials)"
            ) from None

    def _described(self, claim: StorageDriverClaim, size: int) -> StorageDriverClaim:
        data = dict(claim.claim_data)
        data["key"] = self.prefix + data["key"]
        return StorageDriverClaim(
            claim_data={"size": size_text(size), "url": f"s3://{data['bucket']}/{data['key']}", **data}
        )


class _PrefixedClient(S3StorageDriverClient):
    """The SDK's aioboto3 client, opened for each call: values go by reference rarely, and a client
    kept for the process would be tied to one event loop. The driver's keys are written under the
    prefix; reads take a reference's key as it is, since `Described` puts the prefix in it."""

    def __init__(self, session: Any, prefix: str, wrap: Callable[[Any], S3StorageDriverClient]) -> None:
        self.session, self.prefix, self.wrap = session, prefix, wrap

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        async with self._s3() as s3:
            await s3.put_object(bucket=bucket, key=self.prefix + key, data=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        async with self._s3() as s3:
            return await s3.object_exists(bucket=bucket, key=self.prefix + key)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        async with self._s3() as s3:
            return await s3.get_object(bucket=bucket, key=key)

    @contextlib.asynccontextmanager
    async def _s3(self) -> AsyncIterator[S3StorageDriverClient]:
        async with self.session.client("s3") as client:
            yield self.wrap(client)


class Unconfigured(StorageDriver):
    """Where a run's values are in S3 but no AGENTRUN_BLOB_URL says so here: reading one says what
    to set, rather than that no driver has the name."""

    def name(self) -> str:
        return NAME

    def type(self) -> str:
        return NAME

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        raise BadBlobSetting("AGENTRUN_BLOB_URL does not name an S3 bucket")  # never chosen to store

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        where = claims[0].claim_data.get("url") or f"bucket {claims[0].claim_data.get('bucket')}"
        raise BlobUnreadable(
            f"the large value {where} is in S3, and AGENTRUN_BLOB_URL names no bucket here\n"
            "  hint: set AGENTRUN_BLOB_URL=s3://BUCKET/PREFIX and the AWS settings as the worker has them"
        )
