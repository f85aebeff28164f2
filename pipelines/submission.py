"""Submitting and scheduling pipeline runs on Vertex AI Pipelines and self-hosted KFP.

Everything that can be refused is refused before a request is sent: the cron
expression (checked with croniter before anything is compiled), the target's
settings (project, region and `gs://` pipeline root for Vertex AI; an http(s)
host for KFP), Google credentials, and `--param` names and values (checked
against the compiled pipeline's parameter types). Requests go through the SDKs:
`aiplatform.PipelineJob` (`submit`, `create_schedule`) and `kfp.Client`
(`create_run_from_pipeline_package`, `create_recurring_run`).
"""

from __future__ import annotations

import copy
import os
import re
import tempfile
import zoneinfo
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import yaml

from components.core import cloud_ids, json_input
from components.core.config import ConfigError
from components.core.errors import masked_url
from components.core.targets import TARGETS, canonical
from components.image import DEFAULT_IMAGE

_TZ_PREFIX = re.compile(r"^(?:CRON_)?TZ=(?P<zone>\S+)\s+(?P<rest>.*)$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,126}[a-z0-9])?$")


@dataclass(frozen=True)
class Submission:
    """One pipeline to submit or schedule, and where.

    Attributes:
        target: `vertex` (Vertex AI Pipelines) or `kubeflow` (a Kubeflow Pipelines host;
            `kfp` is another name for it).
        pipeline: `training` or `comparison`.
        name: run or schedule display name; default `strategist-<pipeline>`.
        image: the container image of every step.
        gpu: GPU of the train step (None or `none`: no GPU).
        gpus: GPUs of the train step.
        params: pipeline parameters as given (`key=value` strings parsed to str).
        project: Google Cloud project (vertex).
        region: Vertex AI region (vertex).
        pipeline_root: `gs://` folder of the run's artifacts (required for vertex,
            optional for kfp).
        service_account: service account the run runs as (vertex: an email; kfp:
            a Kubernetes service account).
        host: KFP API host, `http(s)://...` (kfp).
        namespace: KFP namespace (multi-user deployments).
        experiment: KFP experiment (default `Default`).
        enable_caching: reuse cached step results (off: every run retrains).
    """

    target: str
    pipeline: str
    name: str | None = None
    image: str = DEFAULT_IMAGE
    gpu: str | None = None
    gpus: int = 1
    params: dict[str, str] = field(default_factory=dict)
    project: str | None = None
    region: str | None = None
    pipeline_root: str | None = None
    service_account: str | None = None
    host: str | None = None
    namespace: str | None = None
    experiment: str | None = None
    enable_caching: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "target", canonical(self.target))  # `kfp` -> `kubeflow`

    @property
    def display_name(self) -> str:
        return self.name or f"strategist-{self.pipeline}"


def parse_param(text: str) -> tuple[str, str]:
    """`key=value` -> (key, value); raises ConfigError otherwise."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(
            f"--param {text!r}: write NAME=VALUE, e.g. --param run_config.training.epochs=10"
        )
    return key.strip(), value


def validate_cron(cron: str, target: str) -> str:
    """Checks a cron expression and returns it in the target's format.

    Vertex AI takes unix cron (5 fields: minute hour day month weekday), with an
    optional `TZ=Area/City ` prefix. KFP takes 6 fields with seconds first; a
    5-field expression is converted by prefixing `0 ` (at second 0).

    Raises:
        ConfigError: not a cron expression the target takes.
    """
    from croniter import croniter

    text = " ".join(cron.split())
    zone = None
    if match := _TZ_PREFIX.match(text):
        zone, text = match["zone"], match["rest"]
        try:
            zoneinfo.ZoneInfo(zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ConfigError(
                f"--cron {cron!r}: unknown time zone {zone!r}; use an IANA name such as "
                "Europe/Berlin"
            ) from None
    fields = text.split(" ") if text else []
    example = "e.g. --cron '0 3 * * 1' (03:00 every Monday)"
    target = canonical(target)
    if target == "kubeflow" and zone:
        raise ConfigError(
            f"--cron {cron!r}: KFP recurring runs have no time-zone prefix; drop "
            f"TZ={zone} and give the time in the cluster's zone (usually UTC)"
        )
    allowed = (5, 6) if target == "kubeflow" else (5,)
    if len(fields) not in allowed:
        what = "5 fields (minute hour day month weekday)" + (
            ", or 6 with seconds first" if target == "kubeflow" else ""
        )
        raise ConfigError(f"--cron {cron!r} has {len(fields)} fields: give {what}, {example}")
    seconds_first = len(fields) == 6
    if not croniter.is_valid(text, second_at_beginning=seconds_first, strict=True):
        raise ConfigError(f"--cron {cron!r} is not a valid cron expression: {example}")
    if target == "kubeflow":
        return text if seconds_first else f"0 {text}"
    return f"TZ={zone} {text}" if zone else text


def check_target(sub: Submission) -> None:
    """Refuses missing or malformed target settings before anything is compiled or sent.

    Raises:
        ConfigError: naming the flag to pass.
    """
    if sub.target not in TARGETS:
        raise ConfigError(
            f"unknown target {sub.target!r}: use --target vertex or --target kubeflow"
        )
    if sub.name is not None and not _NAME.fullmatch(sub.name):
        raise ConfigError(
            f"--name {sub.name!r}: use lowercase letters, digits and '-' (at most 128)"
        )
    if sub.target == "vertex":
        if not sub.project:
            raise ConfigError("Vertex AI needs a project: pass --project PROJECT_ID")
        if not sub.region:
            raise ConfigError("Vertex AI needs a region: pass --region, e.g. us-central1")
        if not sub.pipeline_root or not sub.pipeline_root.startswith("gs://"):
            raise ConfigError(
                "Vertex AI Pipelines writes artifacts to Cloud Storage: pass "
                "--pipeline-root gs://BUCKET/PATH (a bucket in the region the service "
                "account can write)"
            )
        cloud_ids.check_project(sub.project)
        cloud_ids.check_region(sub.region)
        if sub.service_account:
            cloud_ids.check_service_account(sub.service_account)
        return
    if sub.service_account:
        cloud_ids.check_kube_service_account(sub.service_account, "--service-account")
    if not sub.host:
        raise ConfigError(
            "KFP needs the API host: pass --host URL, e.g. after `kubectl port-forward -n "
            "kubeflow svc/ml-pipeline-ui 8080:80`, --host http://localhost:8080"
        )
    if not sub.host.startswith(("http://", "https://")):
        raise ConfigError(
            f"--host {masked_url(sub.host)!r}: give a URL, http://HOST[:PORT] or https://..."
        )


def typed_params(spec: dict[str, Any], raw: dict[str, str]) -> dict[str, Any]:
    """Pipeline parameters converted to the compiled pipeline's parameter types.

    A dotted name sets one field of a structured parameter and keeps the rest
    of its default: `run_config.training.epochs=7`. The run config (and the
    comparison's clusters) are then validated as the trainer would.

    Args:
        spec: the compiled pipeline (its `root.inputDefinitions.parameters`).
        raw: `--param` values as strings.

    Raises:
        ConfigError: an unknown name, a value of the wrong type, or a run
            config the trainer would refuse.
    """
    declared = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    typed: dict[str, Any] = {}
    for key, text in raw.items():
        name, _, field_path = key.partition(".")
        if name not in declared:
            raise ConfigError(
                f"--param {key}: the {spec['pipelineInfo']['name']} pipeline has no such "
                f"parameter; it has {', '.join(sorted(declared))}"
            )
        kind = declared[name]["parameterType"]
        if field_path:
            if kind != "STRUCT":
                raise ConfigError(f"--param {key}: {name} has no fields; pass --param {name}=...")
            base = typed.get(name, copy.deepcopy(declared[name].get("defaultValue", {})))
            typed[name] = _with_field(base, field_path.split("."), _json_or_text(text))
            continue
        try:
            typed[key] = _convert(text, kind)
        except ConfigError:
            raise
        except ValueError:
            raise ConfigError(
                f"--param {key}={text!r}: expected {kind.lower().replace('_', ' ')}"
            ) from None
    _validate_run(declared, typed)
    _validate_cloud(typed.get("cloud_config"))
    return typed


def _validate_cloud(cloud_config: dict[str, Any] | None) -> None:
    """Refuses a `cloud_config` the train step would refuse (an unknown field), before sending."""
    if not cloud_config:
        return
    from components.core.launch.cloud import CloudConfig
    from components.core.launch.cloud_checks import validate_identifiers

    try:
        cloud = CloudConfig(**{**cloud_config, "target": "vertex"})
    except TypeError as err:
        raise ConfigError(f"--param cloud_config: not a CloudConfig ({err})") from None
    try:
        validate_identifiers(cloud)
    except ConfigError as err:
        raise ConfigError(f"--param cloud_config: {err}") from None


def _with_field(struct: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    """`struct` with `value` at `path` (intermediate objects created)."""
    node = struct
    for part in path[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--param: {'.'.join(path)} goes through a value, not an object")
    node[path[-1]] = value
    return struct


def _json_or_text(text: str) -> Any:
    """`text`'s JSON value when it reads as one (checked as every user's JSON is), else `text`.

    Raises:
        ConfigError: an array or object that is not strict JSON, or nests too deeply.
    """
    try:
        return json_input.parse(text, "--param", "pass strict JSON")
    except ConfigError:
        if text.lstrip()[:1] in ("[", "{"):
            raise
        return text


def _validate_run(declared: dict[str, Any], typed: dict[str, Any]) -> None:
    """Refuses a run config (or clusters) the trainer would refuse, before sending."""
    from components.core import promotion
    from components.core.checkpoint_interval import check_preemption_rate
    from components.core.comparison.planning import check_plan
    from components.core.config import validate_pipeline_run
    from components.core.prices import PriceTable

    def value(name: str) -> Any:
        given = typed.get(name, declared[name].get("defaultValue"))
        whole = declared[name]["parameterType"] == "NUMBER_INTEGER"
        if whole and isinstance(given, float) and given.is_integer():
            return int(given)  # a compiled integer default reads back as 1.0
        return given

    try:
        # The checks the pipeline's own steps run (evaluate, plan_runs), here before sending.
        if {"promotion_target", "promotion_metric", "promotion_margin"} <= set(declared):
            promotion.check_settings(
                value("promotion_target"), value("promotion_metric"), value("promotion_margin")
            )
        if {"clusters", "repeats"} <= set(declared):
            check_plan(value("clusters"), value("repeats"))
        # What the compare step prices with (`compare --preemptions-per-machine-hour`, `--prices`).
        if "preemptions_per_machine_hour" in typed:
            check_preemption_rate(typed["preemptions_per_machine_hour"], value("preemptible"))
        if typed.get("prices") is not None and "prices" in declared:
            PriceTable.from_dict(typed["prices"], origin="prices")
    except ConfigError as err:
        raise ConfigError(f"--param {err}") from None
    accuracy = typed.get("target_value")
    on_accuracy = typed.get("target_metric", "accuracy") == "accuracy"
    if accuracy is not None and on_accuracy and not 0 < accuracy <= 1:
        raise ConfigError(
            f"--param target_value must be above 0 and at most 1 for accuracy, got {accuracy}"
        )
    if typed.get("max_steps"):
        from components.core.config import check_max_steps

        check_max_steps(typed["max_steps"])
    if "run_config" not in declared:
        return
    run_config = typed.get("run_config", declared["run_config"].get("defaultValue", {}))
    clusters = typed.get("clusters")
    try:
        config = validate_pipeline_run(run_config, clusters)
    except (ConfigError, TypeError) as err:
        raise ConfigError(f"--param run_config: {err}") from None
    _check_module_reachable(config.model.module)


def _check_module_reachable(module: str | None) -> None:
    """Refuses a model module file of this machine: the pipeline's steps run elsewhere.

    Raises:
        ConfigError: saying to copy it to Cloud Storage or bake it into an image.
    """
    from components.core.model_module import is_file_source

    if module and is_file_source(module) and not module.startswith(("gs://", "/gcs/")):
        raise ConfigError(
            f"--param run_config.model.module={module} is a file of this machine, which the "
            "pipeline's steps cannot read: copy it to Cloud Storage and pass "
            "run_config.model.module=gs://BUCKET/PATH.py, or build an image FROM Strategist's "
            "holding it and pass its module name (containers/README.md)"
        )


def _convert(text: str, kind: str) -> Any:
    if kind == "NUMBER_INTEGER":
        return int(text)
    if kind == "NUMBER_DOUBLE":
        return float(text)
    if kind == "BOOLEAN":
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ValueError(text)
        return lowered == "true"
    if kind in ("LIST", "STRUCT"):
        value = json_input.parse(text, "--param", f"pass a JSON {kind.lower()}")
        if not isinstance(value, list if kind == "LIST" else dict):
            raise ValueError(text)
        return value
    return text


@contextmanager
def compiled(sub: Submission) -> Iterator[tuple[str, dict[str, Any]]]:
    """Compiles the pipeline to a temporary file; yields its path and parsed spec."""
    from pipelines.compile import compile_pipeline

    gpu = sub.gpu if sub.gpu is not None else ("t4" if sub.target == "kubeflow" else None)
    with tempfile.TemporaryDirectory(prefix="strategist-submit-") as folder:
        path = os.path.join(folder, f"{sub.pipeline}-{sub.target}.yaml")
        compile_pipeline(sub.pipeline, sub.target, path, image=sub.image, gpu=gpu, gpus=sub.gpus)
        with open(path, encoding="utf-8") as handle:
            spec = next(yaml.safe_load_all(handle))
        yield path, spec


# Vertex AI ----------------------------------------------------------------------------


def vertex_job(sub: Submission, package: str, params: dict[str, Any], credentials: Any):
    """The `aiplatform.PipelineJob` of a submission (nothing is sent)."""
    from google.cloud import aiplatform

    return aiplatform.PipelineJob(
        display_name=sub.display_name,
        template_path=package,
        pipeline_root=sub.pipeline_root,
        parameter_values=params,
        enable_caching=sub.enable_caching,
        project=sub.project,
        location=sub.region,
        credentials=credentials,
        labels={"strategist-pipeline": sub.pipeline},
    )


def vertex_console_link(sub: Submission, resource_name: str, kind: str = "runs") -> str:
    """The Cloud console page of a pipeline run or schedule."""
    item = resource_name.rsplit("/", 1)[-1]
    return (
        f"https://console.cloud.google.com/vertex-ai/locations/{sub.region}/pipelines/"
        f"{kind}/{item}?project={sub.project}"
    )


def submit_vertex(sub: Submission, package: str, params: dict[str, Any], credentials: Any):
    """Submits one run to Vertex AI Pipelines; returns the `PipelineJob`."""
    job = vertex_job(sub, package, params, credentials)
    job.submit(service_account=sub.service_account)
    return job


def schedule_vertex(
    sub: Submission, package: str, params: dict[str, Any], cron: str, credentials: Any
):
    """Creates a Vertex AI pipeline schedule; returns the `PipelineJobSchedule`.

    At most one scheduled run at a time, so a slow run never overlaps the next.
    """
    job = vertex_job(sub, package, params, credentials)
    return job.create_schedule(
        cron=cron,
        display_name=sub.display_name,
        max_concurrent_run_count=1,
        service_account=sub.service_account,
    )


# Kubeflow Pipelines -------------------------------------------------------------------


def kfp_client(sub: Submission):
    """A `kfp.Client` for the submission's host and namespace.

    Raises:
        ConfigError: the host does not answer (found in at most 5 s, instead of
            the client's retries and its 100-line traceback).
    """
    import kfp
    import kfp_server_api
    import urllib3

    _check_reachable(sub.host)
    try:
        return kfp.Client(host=sub.host, namespace=sub.namespace or "kubeflow")
    except (urllib3.exceptions.HTTPError, kfp_server_api.ApiException, OSError) as err:
        reason = str(err).splitlines()[0][:200]
        raise ConfigError(
            f"the KFP host {masked_url(sub.host)} did not answer as a KFP API ({reason}): "
            "check --host"
        ) from None


def _check_reachable(url: str, timeout_s: float = 5.0) -> None:
    """One request to the host's health endpoint, without retries: reachable or not."""
    import urllib3

    try:
        urllib3.PoolManager().request(
            "GET", f"{url.rstrip('/')}/apis/v2beta1/healthz", retries=False, timeout=timeout_s
        )
    except urllib3.exceptions.HTTPError as err:
        reason = getattr(err, "reason", None) or err
        raise ConfigError(
            f"cannot reach the KFP host {masked_url(url)} "
            f"({str(reason).splitlines()[0][-120:]}): check --host, and that the KFP API is up "
            "(e.g. kubectl port-forward -n kubeflow svc/ml-pipeline-ui 8080:80)"
        ) from None


def kfp_link(client: Any, path: str) -> str:
    """A KFP UI link (`path` like `runs/details/ID`)."""
    return f"{client._get_url_prefix()}/#/{path}"


def submit_kfp(sub: Submission, package: str, params: dict[str, Any], client: Any):
    """Submits one run to KFP; returns kfp's `RunPipelineResult`."""
    return client.create_run_from_pipeline_package(
        package,
        arguments=params,
        run_name=sub.display_name,
        experiment_name=sub.experiment or "Default",
        namespace=sub.namespace,
        pipeline_root=sub.pipeline_root,
        enable_caching=sub.enable_caching,
        service_account=sub.service_account,
    )


def schedule_kfp(sub: Submission, package: str, params: dict[str, Any], cron: str, client: Any):
    """Creates a KFP recurring run (6-field cron); returns the `V2beta1RecurringRun`."""
    experiment = client.create_experiment(name=sub.experiment or "Default", namespace=sub.namespace)
    return client.create_recurring_run(
        experiment_id=experiment.experiment_id,
        job_name=sub.display_name,
        description=f"Strategist {sub.pipeline} pipeline on cron {cron}",
        cron_expression=cron,
        max_concurrency=1,
        no_catchup=True,
        params=params,
        pipeline_package_path=package,
        pipeline_root=sub.pipeline_root,
        enable_caching=sub.enable_caching,
        service_account=sub.service_account,
    )
