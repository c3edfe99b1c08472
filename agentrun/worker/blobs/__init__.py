"""Large values go by reference. An agent's reply, a provider's result, a map's collected results, a
run's state: any payload of AGENTRUN_BLOB_THRESHOLD bytes or more (256 KB unless set) is stored
outside Temporal's history, which keeps a small reference in its place, and is fetched back
wherever the value is read (workflows, activities, the client). Temporal's SDK does both through
the data converter's external storage; this module configures it, in one place for every process.

Where the values go, from AGENTRUN_BLOB_URL:
- unset: the folder `blobs/` of the state folder (AGENTRUN_STATE_DIR, else ~/.local/state/agentrun),
  beside the embedded server's database;
- a folder (`/srv/agentrun-blobs` or `file:///srv/agentrun-blobs`);
- `s3://BUCKET/PREFIX`: an S3-compatible store.
Every worker and client of a Temporal server must be set the same way, or they cannot read each
other's values.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from urllib.parse import urlparse

from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import DataConverter, ExternalStorage, StorageDriver

from agentrun.activities import threads
from agentrun.worker import embedded
from agentrun.worker.blobs import s3
from agentrun.worker.blobs.errors import BadBlobSetting, BlobUnreadable
from agentrun.worker.blobs.folder import FolderDriver
from agentrun.worker.blobs.logs import FolderLogs, S3Logs

URL_ENV, THRESHOLD_ENV = "AGENTRUN_BLOB_URL", "AGENTRUN_BLOB_THRESHOLD"
DEFAULT_THRESHOLD = 256 * 1024
MAX_THRESHOLD = 2 * 1024 * 1024  # Temporal refuses a larger payload in history

__all__ = ["BadBlobSetting", "BlobUnreadable", "data_converter", "threshold", "drivers", "logs"]


def data_converter() -> DataConverter:
    """The one data converter of the engine: pydantic values, large ones stored by reference (and
    conversations, which this sets up for the process's activities). Raises BadBlobSetting."""
    stores = drivers()
    threads.use(logs())  # this process's activities keep conversations in the same store
    # New values go to the configured store; any other is there to read what was written before.
    storage = ExternalStorage(
        drivers=stores, driver_selector=lambda _context, _payload: stores[0], payload_size_threshold=threshold()
    )
    return dataclasses.replace(
        pydantic_data_converter, payload_converter_class=SharedPayloadConverter, external_storage=storage
    )


class SharedPayloadConverter(PydanticPayloadConverter):
    """Pydantic's payload converter, every instance with the same encoders and type-adapter cache.
    With external storage set, the SDK copies the data converter for each payload a workflow task
    sends or receives, and each copy builds its payload converter: this makes building one cheap
    (≈ 50 K instructions a payload less, measured with bench/instructions.py)."""

    def __init__(self) -> None:
        self.converters = _ENCODERS


_ENCODERS = PydanticPayloadConverter().converters


def drivers() -> list[StorageDriver]:
    """The configured store first; the other kind after it, to read (or say why it cannot read) the
    values of runs from before a change of AGENTRUN_BLOB_URL."""
    url = os.environ.get(URL_ENV, "").strip()
    if url.startswith("s3:"):
        bucket, prefix = _bucket(url)
        return [s3.driver(bucket, prefix), FolderDriver(default_folder())]
    return [FolderDriver(_folder(url) if url else default_folder()), s3.Unconfigured()]


def logs() -> FolderLogs | S3Logs:
    """Where conversations are kept (agentrun.activities.threads): in the store of large values."""
    url = os.environ.get(URL_ENV, "").strip()
    if url.startswith("s3:"):
        bucket, prefix = _bucket(url)
        return S3Logs(s3.client(prefix), bucket, prefix)
    return FolderLogs(_folder(url) if url else default_folder())


def default_folder() -> Path:
    return embedded.state_dir() / "blobs"


def threshold() -> int:
    text = os.environ.get(THRESHOLD_ENV, "").strip()
    if not text:
        return DEFAULT_THRESHOLD
    if not text.isdigit() or int(text) > MAX_THRESHOLD:
        what = "is not a number of bytes" if not text.isdigit() else "is over the 2 MB Temporal keeps of one value"
        raise BadBlobSetting(
            f"{THRESHOLD_ENV}: {text!r} {what}\n"
            f"  hint: values this big or bigger are stored outside history, e.g. {THRESHOLD_ENV}={DEFAULT_THRESHOLD}"
        )
    return int(text)


def _bucket(url: str) -> tuple[str, str]:
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise BadBlobSetting(f"{URL_ENV}: {url!r} names no bucket\n  hint: write s3://BUCKET or s3://BUCKET/PREFIX")
    prefix = parsed.path.strip("/")
    return parsed.netloc, f"{prefix}/" if prefix else ""


def _folder(url: str) -> Path:
    parsed = urlparse(url)
    path = parsed.path if parsed.scheme == "file" and not parsed.netloc else url
    if not os.path.isabs(path):
        raise BadBlobSetting(
            f"{URL_ENV}: {url!r} is neither s3://BUCKET/PREFIX nor an absolute folder\n"
            f"  hint: {URL_ENV}=s3://my-bucket/agentrun, or {URL_ENV}=/srv/agentrun-blobs"
        )
    return Path(path)
