"""Compiled pipelines parse strictly into PipelineSpec/PlatformSpec and have the right shape."""

from __future__ import annotations

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from components.core.config import RunConfig, TrainingConfig
from pipelines import cli

IMAGE = "europe-docker.pkg.dev/acme/ml/strategist-trainer:1.2.3"


def _compile(tmp_path, pipeline, target, *extra):
    out = tmp_path / f"{pipeline}-{target}.yaml"
    assert cli.main(
        ["compile", "--pipeline", pipeline, "--target", target, "--image", IMAGE,
         "-o", str(out), *extra]
    ) == 0  # fmt: skip
    docs = list(yaml.safe_load_all(out.read_text()))
    spec = json_format.ParseDict(
        docs[0], pipeline_spec_pb2.PipelineSpec(), ignore_unknown_fields=False
    )
    platform = None
    if len(docs) > 1:
        platform = json_format.ParseDict(
            docs[1], pipeline_spec_pb2.PlatformSpec(), ignore_unknown_fields=False
        )
    return docs, spec, platform


def _deps(dag):
    return {name: set(task.dependent_tasks) for name, task in dag.tasks.items()}


@pytest.mark.parametrize("pipeline", ["training", "comparison"])
def test_vertex_target_is_one_strict_document(tmp_path, pipeline):
    docs, spec, platform = _compile(tmp_path, pipeline, "vertex")
    assert len(docs) == 1 and platform is None  # Vertex rejects a second document
    assert spec.pipeline_info.name == f"strategist-{pipeline}"
    images = {e["container"]["image"] for e in docs[0]["deploymentSpec"]["executors"].values()}
    assert images == {IMAGE}  # one image for every component
    train = docs[0]["deploymentSpec"]["executors"]["exec-train"]["container"]
    assert "accelerator" not in train.get("resources", {})


def test_training_pipeline_structure(tmp_path):
    _, spec, _ = _compile(tmp_path, "training", "vertex")
    assert _deps(spec.root.dag) == {
        "shard-dataset": set(),
        # The select step sizes a user's model module for the shards' examples.
        "select-strategy": {"shard-dataset"},
        "train": {"shard-dataset", "select-strategy"},
        "evaluate": {"train", "shard-dataset"},
        "condition-1": {"train", "evaluate"},
    }
    # promote runs only inside the `blessed` condition, on evaluate's blessing.
    blessed = spec.root.dag.tasks["condition-1"]
    assert blessed.task_info.name == "blessed"
    assert "evaluate" in blessed.trigger_policy.condition
    assert set(spec.components[blessed.component_ref.name].dag.tasks) == {"promote"}
    train_inputs = spec.root.dag.tasks["train"].inputs.parameters
    assert train_inputs["cluster"].task_output_parameter.producer_task == "select-strategy"
    # One structured parameter carries the run to every step, whole.
    params = spec.root.input_definitions.parameters
    assert set(params) >= {"run_config", "machines", "gpus_per_machine", "gpu", "backend"}
    assert not set(params) & {"epochs", "model_name", "batch_size", "strategy", "workers"}
    run_config = json_format.MessageToDict(params["run_config"].default_value)
    assert run_config["cluster"]["strategy"] == "auto"
    assert RunConfig.from_dict(run_config).training == TrainingConfig()
    for step in ("shard-dataset", "select-strategy", "train"):
        channel = spec.root.dag.tasks[step].inputs.parameters["run_config"]
        assert channel.component_input_parameter == "run_config"
    description = spec.components["comp-shard-dataset"].input_definitions.parameters["run_config"]
    assert "dataset" in description.description  # docstrings become UI descriptions
    assert "auto" in params["run_config"].description


def test_comparison_pipeline_loop_and_fan_in(tmp_path):
    _, spec, _ = _compile(tmp_path, "comparison", "vertex")
    root = spec.root.dag.tasks
    loops = [name for name in root if name.startswith("for-loop")]
    assert len(loops) == 1
    loop = root[loops[0]]
    # The loop runs the plan: every cluster `repeats` times, interleaved.
    items = loop.inputs.parameters[loop.parameter_iterator.items.input_parameter]
    assert items.task_output_parameter.producer_task == "plan-runs"
    plan = root["plan-runs"].inputs.parameters
    assert plan["clusters"].component_input_parameter == "clusters"
    assert plan["repeats"].component_input_parameter == "repeats"
    assert spec.root.input_definitions.parameters["repeats"].default_value.number_value == 1
    assert loop.iterator_policy.parallelism_limit == 1  # strategies timed one at a time
    assert set(root) == {
        "shard-dataset", "select-strategy", "plan-runs", loops[0], "compare-strategies",
    }  # fmt: skip
    assert loops[0] in root["compare-strategies"].dependent_tasks
    body = spec.components[loop.component_ref.name].dag
    assert _deps(body) == {"train": set(), "evaluate": {"train"}}
    runs = root["compare-strategies"].inputs.artifacts["runs"]
    assert runs.task_output_artifact.producer_task == loops[0]  # dsl.Collected fan-in
    clusters = spec.root.input_definitions.parameters["clusters"].default_value
    assert [c["strategy"] for c in json_format.MessageToDict(clusters)] == [
        "mirrored", "multi_worker_mirrored", "parameter_server",
    ]  # fmt: skip


@pytest.mark.parametrize("pipeline", ["training", "comparison"])
def test_kfp_target_puts_training_on_a_gpu_node_pool(tmp_path, pipeline):
    docs, _, platform = _compile(tmp_path, pipeline, "kfp", "--gpu", "a100", "--gpus", "2")
    assert len(docs) == 2 and platform is not None
    train = docs[0]["deploymentSpec"]["executors"]["exec-train"]["container"]
    accelerator = train["resources"]["accelerator"]
    assert accelerator["resourceType"] == "nvidia.com/gpu"
    assert int(accelerator["resourceCount"]) == 2
    k8s = platform.platforms["kubernetes"].deployment_spec.executors["exec-train"]
    config = json_format.MessageToDict(k8s)
    assert config["nodeSelector"]["labels"] == {
        "cloud.google.com/gke-accelerator": "nvidia-tesla-a100"
    }
    assert config["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    others = set(platform.platforms["kubernetes"].deployment_spec.executors) - {"exec-train"}
    assert not others  # only the train step asks for a GPU node


def test_kfp_target_defaults_to_one_t4(tmp_path):
    docs, _, platform = _compile(tmp_path, "training", "kfp")
    k8s = json_format.MessageToDict(
        platform.platforms["kubernetes"].deployment_spec.executors["exec-train"]
    )
    assert k8s["nodeSelector"]["labels"]["cloud.google.com/gke-accelerator"] == "nvidia-tesla-t4"


def test_vertex_target_with_gpu_uses_vertex_accelerator_names(tmp_path):
    docs, _, _ = _compile(tmp_path, "training", "vertex", "--gpu", "t4", "--gpus-per-machine", "4")
    accelerator = docs[0]["deploymentSpec"]["executors"]["exec-train"]["container"]["resources"][
        "accelerator"
    ]
    assert accelerator["resourceType"] == "NVIDIA_TESLA_T4"
    assert int(accelerator["resourceCount"]) == 4


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--gpu", "t4", "--gpus", "8"], "do not fit one machine"),
        (["--gpu", "tpu-v9"], "unknown GPU"),
        (["--image", "not an image"], "not a container image reference"),
    ],
)
def test_bad_compile_input_exits_2_and_writes_nothing(tmp_path, capsys, extra, message):
    out = tmp_path / "x.yaml"
    argv = ["compile", "--pipeline", "training", "--target", "kfp", "-o", str(out), *extra]
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_the_run_plan_interleaves_every_strategys_repeats():
    """`plan_runs`, the comparison's run order: s1, s2, s1, s2, so drift hits both alike."""
    from components.core.config import ConfigError, interleaved_runs
    from components.plan import plan_runs

    clusters = [{"strategy": "mirrored"}, {"strategy": "parameter_server"}]
    order = plan_runs(clusters=clusters, repeats=2)
    assert [c["strategy"] for c in order] == ["mirrored", "parameter_server"] * 2
    assert interleaved_runs(clusters, 1) == clusters
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="repeats"):
            interleaved_runs(clusters, bad)
