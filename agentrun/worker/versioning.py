"""Worker Deployment Versioning: a worker names the build it runs (a deployment and a build id), a
run stays on the build it started on (pinned), and a new build takes new runs once made current.

Opt-in (`agentrun worker --versioning` or AGENTRUN_VERSIONING=1): a versioned worker takes no new run
until its build is made current, and a task queue served by versioned workers sends nothing to the
unversioned ones an `agentrun start` spawns; so existing set-ups keep working as they are until a
person chooses to pin their runs (docs/operations.md, "Upgrading")."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from importlib import metadata

from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionMessage
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionOptions
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
    UpdateWorkflowExecutionOptionsRequest,
)
from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from agentrun.errors import UsageError

VERSIONING_ENV = "AGENTRUN_VERSIONING"
SUFFIX_ENV = "AGENTRUN_BUILD_SUFFIX"
DEPLOYMENT_ENV = "AGENTRUN_DEPLOYMENT"
DEPLOYMENT = "agentrun"
ON = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Versioning:
    """What a versioned worker says of itself."""

    deployment: str
    build_id: str

    def config(self) -> WorkerDeploymentConfig:
        return WorkerDeploymentConfig(
            version=WorkerDeploymentVersion(self.deployment, self.build_id),
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED,
        )


def build_id(suffix: str | None = None) -> str:
    """agentrun's version, and the user's suffix (their own code, agents, image tag) after a `+`."""
    suffix = suffix if suffix is not None else os.environ.get(SUFFIX_ENV, "")
    # The installed version (pyproject's, read from agentrun.__version__): the package itself
    # imports the client API, which a worker is below.
    version = metadata.version("agentrun")
    return f"{version}+{suffix}" if suffix else version


def deployment_name(name: str | None = None) -> str:
    return name or os.environ.get(DEPLOYMENT_ENV) or DEPLOYMENT


def from_options(enabled: bool | None, suffix: str | None, deployment: str | None) -> Versioning | None:
    """The worker's versioning, from its flags over AGENTRUN_VERSIONING / _BUILD_SUFFIX / _DEPLOYMENT;
    None when it is off (the default)."""
    if enabled is None:
        enabled = os.environ.get(VERSIONING_ENV, "").lower() in ON
    return Versioning(deployment_name(deployment), build_id(suffix)) if enabled else None


def _version(deployment: str, build: str) -> VersionMessage:
    return VersionMessage(deployment_name=deployment, build_id=build)


async def current_build(client: Client, deployment: str | None = None) -> str | None:
    """The build new runs go to; None when none is current (or the deployment has no worker yet)."""
    try:
        info = await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment_name(deployment))
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    current = info.worker_deployment_info.routing_config.current_deployment_version
    return current.build_id or None


async def promote(client: Client, build: str, deployment: str | None = None, patience_s: float = 0.0) -> None:
    """Make `build` current: new runs go to its workers, runs pinned to older builds stay there.
    Temporal knows a build once one of its workers has polled: wait up to `patience_s` for that.
    Raises UsageError when it does not know the build."""
    name = deployment_name(deployment)
    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=client.namespace, deployment_name=name, build_id=build, identity=client.identity
    )
    deadline = asyncio.get_running_loop().time() + patience_s
    while True:
        try:
            await client.workflow_service.set_worker_deployment_current_version(request)
            return
        except RPCError as exc:
            if exc.status not in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
                raise
            if asyncio.get_running_loop().time() >= deadline:
                raise UsageError(
                    f"Temporal does not know build {build!r} of deployment {name!r}: {exc.message}\n"
                    "  hint: start a worker with --versioning for that build first "
                    f"(AGENTRUN_BUILD_SUFFIX makes ids like {build_id('mine')!r})"
                ) from None
            await asyncio.sleep(0.2)


async def first_current(client: Client, versioning: Versioning) -> bool:
    """Make this worker's build current when its deployment has none yet (its first versioned
    worker): else nothing would take new runs until someone promotes one. True if it did."""
    if await current_build(client, versioning.deployment) is not None:
        return False
    await promote(client, versioning.build_id, versioning.deployment, patience_s=30.0)
    return True


async def move(client: Client, run_id: str, build: str, deployment: str | None = None) -> None:
    """Pin run `run_id` to `build` from its next workflow task on (a versioning override)."""
    override = VersioningOverride(
        pinned=VersioningOverride.PinnedOverride(
            behavior=VersioningOverride.PinnedOverrideBehavior.PINNED_OVERRIDE_BEHAVIOR_PINNED,
            version=_version(deployment_name(deployment), build),
        )
    )
    await client.workflow_service.update_workflow_execution_options(
        UpdateWorkflowExecutionOptionsRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=run_id),
            workflow_execution_options=WorkflowExecutionOptions(versioning_override=override),
            update_mask=FieldMask(paths=["versioning_override"]),
            identity=client.identity,
        )
    )


def build_of(description: WorkflowExecutionDescription) -> str | None:
    """The build a run is on (`deployment:build`), where its workers are versioned."""
    info = description.raw_description.workflow_execution_info.versioning_info
    override = info.versioning_override.pinned.version
    version = override if override.build_id else info.deployment_version
    if version.build_id:
        return f"{version.deployment_name}:{version.build_id}"
    return None
