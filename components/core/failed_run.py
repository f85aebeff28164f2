"""A training run that did not finish, as a comparison records it: the cluster it ran, how
it ended (`diverged` or `failed`) and the failing task's own error line.

A comparison's train step writes this record in place of `metrics.json` when its strategy's
training fails (`launch.train_to_artifacts(record_failure=True)`), so the other strategies
still train and the report names this one; bad input still fails the step. It is strict
JSON, and no reader of `RunMetrics` mistakes it for a finished run: it has no throughput.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from components.core.config import ClusterConfig
from components.core.errors import ConfigError

# How a run that did not finish ended: its training diverged (a non-finite loss or
# metric, `divergence`), or a task failed with no restart left (a crash, a stall).
DIVERGED = "diverged"
FAILED = "failed"
OUTCOMES = (DIVERGED, FAILED)
# The record's key that says it is a run that did not finish.
OUTCOME_KEY = "outcome"


@dataclasses.dataclass(frozen=True)
class FailedRun:
    """A run that did not finish.

    Attributes:
        strategy: the strategy it trained with.
        workers: training machines of its cluster.
        ps: parameter servers of its cluster.
        gpus_per_machine: devices per training machine.
        outcome: `diverged` or `failed`.
        error: the failing task's own error line (`chief-0 exited 3: training diverged: ...`).
    """

    strategy: str
    workers: int
    ps: int
    gpus_per_machine: int
    outcome: str
    error: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def from_failure(cluster: ClusterConfig, failure: Exception) -> FailedRun:
    """The record of `cluster`'s run that ended in `failure`.

    Args:
        cluster: the cluster that trained.
        failure: the local launcher's `ClusterFailed` (its `diverged` says how it
            ended) or a cloud job's `JobFailed`.
    """
    diverged = bool(getattr(failure, "diverged", False))
    return FailedRun(
        strategy=cluster.strategy,
        workers=cluster.workers,
        ps=cluster.ps,
        gpus_per_machine=cluster.gpus_per_machine,
        outcome=DIVERGED if diverged else FAILED,
        error=getattr(failure, "summary", None) or f"{failure}\n".splitlines()[0],
    )


def is_failed_run(record: Any) -> bool:
    """Whether a run's record (parsed JSON) is a `FailedRun`'s."""
    return isinstance(record, Mapping) and OUTCOME_KEY in record


def from_dict(record: Mapping[str, Any], source: str = "record") -> FailedRun:
    """A `FailedRun` from its record.

    Raises:
        ConfigError: a field missing, of the wrong type, or an unknown outcome.
    """
    fields = {f.name: f.type for f in dataclasses.fields(FailedRun)}
    kinds = {"str": str, "int": int}
    for name, kind in fields.items():
        value = record.get(name)
        if not isinstance(value, kinds[kind]) or isinstance(value, bool):
            raise ConfigError(f"{source}: a failed run's {name!r} must be a {kind}, got {value!r}")
    if record[OUTCOME_KEY] not in OUTCOMES:
        raise ConfigError(
            f"{source}: a failed run's outcome {record[OUTCOME_KEY]!r} is none of "
            f"{', '.join(OUTCOMES)}"
        )
    return FailedRun(**{name: record[name] for name in fields})
