"""What a launcher does around one remote job, on every cloud: the `gcp_resources`
record, re-attaching to the job it names, and retrying transient API errors.

Modelled on Google Cloud Pipeline Components' custom-job launcher, which writes
the created job into the step's `gcp_resources` output (so the KFP UI links to it
and a cancelled run cancels it), reads that output back when the step runs again
(a retry, a restarted pod) and polls the job it names instead of creating one more:
https://github.com/kubeflow/pipelines/blob/master/components/google-cloud/google_cloud_pipeline_components/container/v1/gcp_launcher/job_remote_runner.py
https://github.com/kubeflow/pipelines/blob/master/components/google-cloud/google_cloud_pipeline_components/container/v1/custom_job/remote_runner.py
Unlike it, a transient error (unavailable, deadline, 429, 5xx, a dropped
connection) is retried with capped exponential backoff on every call, create
included, and an earlier job that ended without success is not followed: the
retried step launches a new one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from components.core import storage
from components.core.config import ConfigError

T = TypeVar("T")

# GcpResources JSON (google_cloud_pipeline_components/proto/gcp_resources.proto),
# as protobuf's MessageToJson writes it: camelCase field names.
_RESOURCES, _TYPE, _URI = "resources", "resourceType", "resourceUri"


@dataclass(frozen=True)
class JobRecord:
    """One remote job as the `gcp_resources` output names it.

    Attributes:
        resource_type: `CustomJob` (Vertex AI) or `TFJob` (Kubeflow).
        resource_uri: the job's REST URI, e.g.
            `https://us-central1-aiplatform.googleapis.com/v1/projects/P/locations/L/customJobs/ID`.
    """

    resource_type: str
    resource_uri: str


def write_gcp_resources(path: str | None, record: JobRecord) -> None:
    """Writes `record` as the step's `gcp_resources` output (nothing when `path` is None)."""
    if path:
        storage.write_text(path, gcp_resources_json([record]))


def gcp_resources_json(records: list[JobRecord]) -> str:
    """GcpResources JSON of `records` (`{"resources": []}` for a step that made none)."""
    resources = [{_TYPE: r.resource_type, _URI: r.resource_uri} for r in records]
    return json.dumps({_RESOURCES: resources})


def read_gcp_resources(path: str | None, resource_type: str) -> JobRecord | None:
    """The job an earlier run of this step recorded, or None (no record, or an empty one).

    Raises:
        ConfigError: the file holds something else than one job of `resource_type`;
            it names the file to delete so that a new job is launched.
    """
    if not path or not storage.exists(path) or storage.size(path) == 0:
        return None
    text = storage.read_text(path)
    try:
        resources = json.loads(text)[_RESOURCES]
        records = [JobRecord(r[_TYPE], r[_URI]) for r in resources]
    except (ValueError, KeyError, TypeError):
        records = None
    if records == []:
        return None
    if not records or len(records) != 1 or records[0].resource_type != resource_type:
        raise ConfigError(
            f"gcp_resources {path} does not name one {resource_type} ({text[:200]!r}): "
            "delete it to launch a new job"
        )
    return records[0]


class RemoteCallFailed(RuntimeError):
    """A call to the cloud's API failed for good (a permanent error, or transient ones
    past the retry deadline); the message names the call and the error."""


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff between retries of one call.

    Attributes:
        initial_s: the first wait.
        multiplier: each next wait is this many times the last.
        maximum_s: no wait is longer.
        deadline_s: give up once this much waiting has not got the call through
            (GCPC gives `get_custom_job` 10 minutes).
    """

    initial_s: float = 1.0
    multiplier: float = 2.0
    maximum_s: float = 60.0
    deadline_s: float = 600.0

    def delays(self) -> Iterator[float]:
        """Waits before each retry, until their sum would pass the deadline."""
        delay, waited = self.initial_s, 0.0
        while waited + delay <= self.deadline_s:
            yield delay
            waited += delay
            delay = min(delay * self.multiplier, self.maximum_s)


DEFAULT_BACKOFF = Backoff()


def call_with_retries(
    call: Callable[[], T],
    what: str,
    *,
    backoff: Backoff,
    sleep: Callable[[float], None],
    log: Callable[[str], None],
    budget_s: float | None = None,
    notice_after_s: float | None = None,
) -> T:
    """`call()`, retried after transient errors with `backoff`.

    Args:
        call: the API call.
        what: names the call in every line.
        backoff: waits between retries.
        sleep: how to wait.
        log: where retry lines go.
        budget_s: no retry starts later than this many seconds (calls included, not
            only waits) after the first attempt, e.g. to fit a grace period.
        notice_after_s: print a line when one attempt has had no reply for this long.

    Raises:
        RemoteCallFailed: a permanent error, or transient ones until the deadline.
        ConfigError: raised by `call` itself (input to fix), passed through.
    """
    delays = backoff.delays()
    started = time.monotonic()
    while True:
        try:
            return _attempt(call, what, log, notice_after_s)
        except ConfigError:  # input to fix, not the API's failure
            raise
        except Exception as err:  # sorted below: transient ones are retried
            delay = next(delays, None) if is_transient(err) else None
            late = budget_s is not None and time.monotonic() - started + (delay or 0) > budget_s
            if delay is not None and late:
                delay = None
            if delay is None:
                kind = "transient errors past the retry deadline" if is_transient(err) else "error"
                raise RemoteCallFailed(f"{what} failed ({kind}): {describe(err)}") from err
            log(f"{what}: transient error ({describe(err)}); retrying in {delay:g}s")
            sleep(delay)


def _attempt(
    call: Callable[[], T], what: str, log: Callable[[str], None], notice_after_s: float | None
) -> T:
    """One call; a line when it has had no reply for `notice_after_s` (the call's own
    timeout ends it)."""
    if not notice_after_s:
        return call()
    timer = threading.Timer(
        notice_after_s, lambda: log(f"{what}: no reply after {notice_after_s:g}s; still waiting")
    )
    timer.daemon = True
    timer.start()
    try:
        return call()
    finally:
        timer.cancel()


def cancel(
    call: Callable[[], Any], retrying: Callable[..., Any], log: Callable[[str], None]
) -> bool:
    """Cancels (or deletes) a job on an interrupt: retried, and not cut short by a
    second signal; a failure is logged, so the interrupt itself still ends the step.

    Returns:
        Whether the call went through.
    """
    from components.core.signals import signals_ignored

    with signals_ignored():
        try:
            retrying(call, "cancel")
        except RemoteCallFailed as err:
            log(f"{err}: the job may still run; stop it in the console")
            return False
    return True


def _chain(error: BaseException) -> Iterator[BaseException]:
    """`error` and what caused it (the kubeflow SDK wraps ApiException in RuntimeError;
    urllib3's MaxRetryError keeps its cause in `reason`). An interrupt the error was
    raised while handling (a cancel after Ctrl-C) is not its cause, and ends the chain."""
    seen = set()
    while error is not None and id(error) not in seen and isinstance(error, Exception):
        seen.add(id(error))
        yield error
        reason = getattr(error, "reason", None)
        if isinstance(reason, Exception):
            error = reason
            continue
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)


def _transient_types() -> tuple[type[BaseException], ...]:
    import requests
    import urllib3
    from google.api_core import exceptions as gexc
    from google.auth.exceptions import TransportError

    return (
        # gRPC UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED (a TooManyRequests),
        # INTERNAL, and their HTTP forms 503, 504, 429, 500, 502.
        gexc.ServiceUnavailable,
        gexc.DeadlineExceeded,
        gexc.GatewayTimeout,
        gexc.TooManyRequests,
        gexc.InternalServerError,
        gexc.BadGateway,
        TransportError,  # refreshing the access token did not reach Google
        ConnectionError,
        TimeoutError,
        requests.exceptions.ConnectionError,
        requests.exceptions.Timeout,
        urllib3.exceptions.ProtocolError,
        urllib3.exceptions.MaxRetryError,
        urllib3.exceptions.TimeoutError,
        urllib3.exceptions.NewConnectionError,
    )


def api_status(error: BaseException) -> int | None:
    """The HTTP status of a Kubernetes `ApiException` in `error`'s chain, if any."""
    from kubernetes.client.exceptions import ApiException

    for err in _chain(error):
        if isinstance(err, ApiException):
            return err.status
    return None


def is_transient(error: BaseException) -> bool:
    """True for errors a later identical call may not get: unavailable, deadline,
    429 and 5xx (Kubernetes too), dropped connections; False for the rest, and for
    a server certificate that does not verify (retrying cannot change it)."""
    import ssl

    chain = list(_chain(error))
    # urllib3 keeps the ssl module's error as an argument of its own SSLError.
    causes = chain + [arg for err in chain for arg in err.args if isinstance(arg, Exception)]
    if any(isinstance(err, ssl.SSLCertVerificationError) for err in causes):
        return False
    status = api_status(error)
    if status is not None:
        return status == 429 or status >= 500
    return any(isinstance(err, _transient_types()) for err in chain)


def describe(error: BaseException) -> str:
    """One line: the error's type and message (the root cause's when wrapped); for a
    Kubernetes API error, its HTTP status, reason and the server's own `message`."""
    from kubernetes.client.exceptions import ApiException

    chain = list(_chain(error)) or [error]
    for err in chain:
        if isinstance(err, ApiException):
            return _describe_api_error(err)
    root = chain[-1]
    text = " ".join(str(root).split())[:300]
    return f"{type(root).__name__}: {text}" if text else type(root).__name__


def _describe_api_error(error: Any) -> str:
    """`HTTP 403 Forbidden: <the server's message>` from a Kubernetes ApiException,
    whose string form starts with the reply's headers."""
    message = ""
    try:
        body = json.loads(error.body or "")
        message = body.get("message", "") if isinstance(body, dict) else ""
    except (TypeError, ValueError):
        message = " ".join(str(error.body or "").split())[:300]
    # Status 0: the client's own error before any reply (its reason holds the cause).
    reason = " ".join(str(error.reason).split())
    status = f"HTTP {error.status} {reason}" if error.status else reason
    return f"{status}: {message}" if message else status
