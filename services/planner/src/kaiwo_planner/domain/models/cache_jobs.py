"""The cache Jobs of a Model: the settings the load and evict Jobs share, and the load Job
a Model's setup asks for (its files fetched into the cache volume)."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.models_config import ModelsConfig
from kaiwo_contracts.plans import ObjectRef

from kaiwo_planner.domain.models.cache import JobSettings, load_job_manifest
from kaiwo_planner.domain.models.credentials import source_additions
from kaiwo_planner.domain.models.setup import ModelSetup
from kaiwo_planner.domain.settings.namespace_config import NamespaceSettings


def job_settings(config: ModelsConfig, namespace: NamespaceSettings) -> JobSettings:
    """The image, security contexts and pull secrets of the cache Jobs: the configuration's
    pull secrets, then the namespace's (AIMNamespaceConfig), as the server Pods get them.
    The load and the evict Job run the same image, so both need them: without them a
    private loader image left the evict Job's Pod waiting to be pulled, and the deleted
    Model held by its finalizer, for good (decision 0253)."""
    pods = config.model_server_pods
    secrets = [s.name for s in pods.image_pull_secrets]
    secrets += [n for n in namespace.image_pull_secrets if n not in secrets]
    return JobSettings(
        image=config.model_loading.image,
        pod_security_context=pods.pod_security_context,
        security_context=pods.security_context,
        image_pull_secrets=tuple(secrets),
    )


def load_job_of(setup: ModelSetup, identity: ObjectRef) -> dict[str, Any]:
    """The Job that loads the Model's files into its cache (``setup.cache`` is set)."""
    spec = setup.model.spec
    assert setup.cache is not None
    credentials = source_additions(
        setup.source,
        secrets=setup.config.secret_names,
        namespace=setup.namespace,
        user_env=spec.env or {},
    )
    return load_job_manifest(
        identity,
        url=spec.url,
        profile=setup.cache.profile,
        settings=job_settings(setup.config, setup.namespace),
        env=spec.env or {},
        credentials=credentials,
        env_from=tuple(source.to_wire() for source in spec.env_from or ()),
    )
