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
        # evaluate reads the trainer's record: no shards, no second evaluation.
        "evaluate": {"train"},
        "promote-if-blessed": {"train", "evaluate"},
    }
    # promote runs only inside the `blessed` condition, on evaluate's `blessed` output.
    gate = spec.root.dag.tasks["promote-if-blessed"]
    assert gate.inputs.parameters["blessed"].task_output_parameter.output_parameter_key == (
        "blessed"
    )
    gate_dag = spec.components[gate.component_ref.name].dag
    blessed = gate_dag.tasks["condition-1"]
    assert blessed.task_info.name == "blessed"
    assert "blessed" in blessed.trigger_policy.condition
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
    assert loop.task_info.name == "each strategy"
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
    from components.core.comparison.planning import interleaved_runs
    from components.core.config import ConfigError
    from components.plan import plan_runs

    clusters = [{"strategy": "mirrored"}, {"strategy": "parameter_server"}]
    order = plan_runs(clusters=clusters, repeats=2)
    assert [c["strategy"] for c in order] == ["mirrored", "parameter_server"] * 2
    assert interleaved_runs(clusters, 1) == clusters
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="repeats"):
            interleaved_runs(clusters, bad)


# What the KFP run form and graph show: every parameter and output described, each name
# meaning one thing in both pipelines, structured settings typed (the golden names).
GOLDEN = {
    "training": {
        "display_name": "Strategist training",
        "tasks": {
            "shard-dataset": "shard data",
            "select-strategy": "select strategy",
            "train": "train",
            "evaluate": "evaluate and bless",
            "promote-if-blessed": "promote if blessed",
        },
        "parameters": {
            "run_config": "STRUCT", "machines": "NUMBER_INTEGER",
            "gpus_per_machine": "NUMBER_INTEGER", "gpu": "STRING",
            "network_gbps": "NUMBER_DOUBLE", "network_path": "STRING",
            "preemptible": "BOOLEAN", "async_ok": "BOOLEAN", "history": "STRING",
            "backend": "STRING",
            "cloud_config": "STRUCT",
            "rehearse": "BOOLEAN", "promotion_target": "STRING", "promotion_root": "STRING",
            "promotion_metric": "STRING", "promotion_margin": "NUMBER_DOUBLE",
            "model_display_name": "STRING",
        },
        "outputs": {
            "test_accuracy": "NUMBER_DOUBLE",
            "promotion_metric_value": "NUMBER_DOUBLE",
            "blessed": "BOOLEAN",
        },
    },
    "comparison": {
        "display_name": "Strategist comparison",
        "tasks": {
            "shard-dataset": "shard data",
            "select-strategy": "select strategy",
            "plan-runs": "plan runs",
            "for-loop-1": "each strategy",
            "compare-strategies": "compare strategies",
        },
        "parameters": {
            "run_config": "STRUCT", "clusters": "LIST", "machines": "NUMBER_INTEGER",
            "gpus_per_machine": "NUMBER_INTEGER", "gpu": "STRING",
            "network_gbps": "NUMBER_DOUBLE", "network_path": "STRING",
            "preemptible": "BOOLEAN", "preemptions_per_machine_hour": "NUMBER_DOUBLE",
            "prices": "STRUCT", "async_ok": "BOOLEAN", "target_value": "NUMBER_DOUBLE",
            "target_metric": "STRING", "backend": "STRING", "cloud_config": "STRUCT",
            "rehearse": "BOOLEAN", "repeats": "NUMBER_INTEGER", "max_steps": "NUMBER_INTEGER",
        },
        "outputs": {"winner": "STRING", "speedup_over_runner_up": "NUMBER_DOUBLE"},
    },
}  # fmt: skip


@pytest.mark.parametrize("pipeline", ["training", "comparison"])
def test_golden_names_and_descriptions_of_the_run_form(tmp_path, pipeline):
    docs, spec, _ = _compile(tmp_path, pipeline, "vertex")
    golden = GOLDEN[pipeline]
    assert spec.pipeline_info.display_name == golden["display_name"]
    root = spec.root
    tasks = {name: task.task_info.name for name, task in root.dag.tasks.items()}
    assert tasks == golden["tasks"]
    params = root.input_definitions.parameters
    kinds = {
        name: pipeline_spec_pb2.ParameterType.ParameterTypeEnum.Name(p.parameter_type)
        for name, p in params.items()
    }
    assert kinds == golden["parameters"]
    assert all(len(p.description) > 10 for p in params.values()), "a parameter has no description"
    outputs = root.output_definitions.parameters
    assert {
        name: pipeline_spec_pb2.ParameterType.ParameterTypeEnum.Name(o.parameter_type)
        for name, o in outputs.items()
    } == golden["outputs"]
    assert all(o.description for o in outputs.values())
    # Every step's inputs and outputs are described too, and no output is called `Output`.
    for name, component in spec.components.items():
        if component.HasField("dag"):
            continue
        described = [
            *component.input_definitions.parameters.values(),
            *component.input_definitions.artifacts.values(),
            *component.output_definitions.parameters.values(),
            *component.output_definitions.artifacts.values(),
        ]
        assert all(d.description for d in described), name
        # kfp.local 2.17 loops only over an output named `Output` (components/plan.py).
        if name != "comp-plan-runs":
            assert "Output" not in component.output_definitions.parameters, name
    evaluate = spec.components["comp-evaluate"].output_definitions.parameters
    assert set(evaluate) == {"blessed", "test_accuracy", "metric_value", "blessing_reason"}


@pytest.mark.parametrize(
    ("target", "extra", "backend", "devices"),
    [
        ("vertex", [], "vertex", 1),  # training runs as a Vertex AI CustomJob
        ("kubeflow", ["--gpu", "none"], "kubeflow", 1),  # a TFJob
        ("kubeflow", ["--gpu", "a100", "--gpus-per-machine", "4"], "local", 4),  # on the step
        ("vertex", ["--gpu", "t4", "--gpus-per-machine", "2"], "local", 2),
        # No --gpu: the cloud job's machines, which the select step chooses for.
        ("vertex", ["--gpus-per-machine", "2"], "vertex", 2),
        ("vertex", ["--gpus", "2"], "vertex", 2),  # the older name
        ("kubeflow", ["--gpu", "none", "--gpus-per-machine", "4"], "kubeflow", 4),
    ],
)
def test_a_cluster_spec_defaults_to_where_it_runs(
    tmp_path, capsys, target, extra, backend, devices
):
    """`backend` follows the compile target, and the GPUs per machine the train step's."""
    for pipeline in ("training", "comparison"):
        _, spec, _ = _compile(tmp_path, pipeline, target, *extra)
        said = f"defaults: backend={backend}, gpus_per_machine={devices} "
        assert said in capsys.readouterr().out
        params = json_format.MessageToDict(spec.root.input_definitions)["parameters"]
        assert params["backend"]["defaultValue"] == backend
        assert params["gpus_per_machine"]["defaultValue"] == devices
        if pipeline == "comparison":
            mirrored = params["clusters"]["defaultValue"][0]
            assert mirrored["strategy"] == "mirrored"
            assert mirrored["gpus_per_machine"] == devices


def test_compiled_files_are_readable_by_the_group(tmp_path):
    _compile(tmp_path, "training", "vertex")
    mode = (tmp_path / "training-vertex.yaml").stat().st_mode
    assert mode & 0o040, oct(mode)  # group may read (the process umask permitting, 022 here)


@pytest.mark.parametrize("target", ["vertex", "kfp"])
@pytest.mark.parametrize("pipeline", ["training", "comparison"])
def test_the_run_form_shows_whole_numbers_as_integers(tmp_path, pipeline, target):
    """KFP stores numbers as doubles; the form must not show `epochs: 5.0` or `[Default: 1.0]`."""
    docs, spec, _ = _compile(tmp_path, pipeline, target)
    root = docs[0]["root"]["inputDefinitions"]["parameters"]
    integers = {n: p for n, p in root.items() if p["parameterType"] == "NUMBER_INTEGER"}
    assert integers and all(type(p["defaultValue"]) is int for p in integers.values())
    training = root["run_config"]["defaultValue"]["training"]
    assert type(training["epochs"]) is int and type(training["base_learning_rate"]) is float
    header = (tmp_path / f"{pipeline}-{target}.yaml").read_text().split("\ncomponents:")[0]
    assert "#    gpus_per_machine: int [Default: 1]" in header
    assert "int [Default: 1.0]" not in header and "'epochs': 5.0" not in header
    # The values are unchanged: the spec parses and the run config is the default one.
    assert RunConfig.from_dict(root["run_config"]["defaultValue"]) is not None
    gpus = spec.root.input_definitions.parameters["gpus_per_machine"]
    assert gpus.default_value.number_value == 1
