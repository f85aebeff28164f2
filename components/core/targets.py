"""Where a run or a pipeline goes: one vocabulary for every `--target`.

`vertex` is Vertex AI (a CustomJob for `train`, Vertex AI Pipelines for `compile`,
`submit` and `schedule`); `kubeflow` is your own Kubernetes cluster (a TFJob for
`train`, a Kubeflow Pipelines host for the others). `kfp` is accepted everywhere
as another name for `kubeflow`.
"""

from __future__ import annotations

import argparse

TARGETS = ("vertex", "kubeflow")
ALIASES = {"kfp": "kubeflow"}


def canonical(target: str) -> str:
    """`target` with an alias resolved (`kfp` -> `kubeflow`); other names unchanged."""
    return ALIASES.get(target, target)


def add_target_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup, **kwargs):
    """Adds `--target` taking `vertex` or `kubeflow`; an alias becomes its canonical name."""
    kwargs.setdefault("help", "vertex or kubeflow (kfp is another name for kubeflow)")
    return parser.add_argument("--target", type=canonical, choices=TARGETS, **kwargs)
