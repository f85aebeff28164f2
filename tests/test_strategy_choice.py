"""Tests of strategy_choice."""

from __future__ import annotations

import json

import pytest

from components.core.config import ConfigError


def test_the_pipelines_select_step_takes_the_runs_precision():
    from components.core.config import ModelConfig, RunConfig, TrainingConfig
    from components.core.strategy_choice import choose_for_pipeline

    def choice(precision: str):
        run = RunConfig(model=ModelConfig("resnet50"), training=TrainingConfig(precision=precision))
        return choose_for_pipeline(
            run_config=run.to_pipeline_parameter(),
            machines=1,
            gpus_per_machine=8,
            gpu="v100",
            interconnect=None,
            network_gbps=10.0,
        )

    assert "TFLOP/s sustained, mixed" in choice("mixed_bfloat16").markdown
    assert "TFLOP/s sustained, fp32" in choice("float32").markdown


def test_the_pipelines_select_step_takes_the_runs_jit_compile():
    from components.core.config import ModelConfig, RunConfig, TrainingConfig
    from components.core.strategy_choice import choose_for_pipeline

    def choose(jit_compile: bool) -> tuple[dict, str]:
        run = RunConfig(
            model=ModelConfig("resnet50"), training=TrainingConfig(jit_compile=jit_compile)
        )
        choice = choose_for_pipeline(
            run_config=run.to_pipeline_parameter(),
            machines=4,
            gpus_per_machine=8,
            gpu="v100",
            interconnect=None,
            network_gbps=10.0,
        )
        rec = json.loads(choice.recommendation_json)
        every = [{"strategy": rec["strategy"], "predicted": rec["predicted"]}, *rec["alternatives"]]
        mwm = next(c for c in every if c["strategy"] == "multi_worker_mirrored")
        return mwm["predicted"], choice.markdown

    plain, plain_md = choose(False)
    xla, xla_md = choose(True)
    # the run's jit_compile reaches the selector; under TensorFlow's one-pack all-reduce
    # nothing hides either way, so the communication is the same
    assert xla["communication_s"] == plain["communication_s"]
    assert "XLA" in xla_md and "XLA" not in plain_md


def test_the_pipelines_select_step_takes_the_network_path():
    from components.core.config import ModelConfig, RunConfig
    from components.core.strategy_choice import choose_for_pipeline

    def choose(network_path: str) -> dict:
        choice = choose_for_pipeline(
            run_config=RunConfig(model=ModelConfig("resnet50")).to_pipeline_parameter(),
            machines=8,
            gpus_per_machine=8,
            gpu="v100",
            interconnect=None,
            network_gbps=25.0,
            network_path=network_path,
        )
        return json.loads(choice.recommendation_json)

    host, overlay = choose("host"), choose("overlay")
    assert overlay["inputs"]["topology"]["network_path"] == "overlay"
    # every machine pays on the host network; through the overlay they scale below the
    # floor (and still train: the fastest answer)
    assert overlay["layout"]["workers"] == host["layout"]["workers"] == 8
    assert overlay["predicted"]["scaling_efficiency"] < host["predicted"]["scaling_efficiency"]
    assert any("overlay" in r for r in overlay["reasons"])
    with pytest.raises(ConfigError, match="--network-path"):
        choose("vxlan")


def test_the_pipelines_select_step_takes_async_ok_and_preemptible():
    """From the KFP form, as from `select`: a dense model trains with parameter servers
    only when asynchronous updates are acceptable or the machines are preemptible."""
    from components.core.config import ClusterConfig, ModelConfig, RunConfig
    from components.core.strategy_choice import choose_for_pipeline

    def choose(**reasons: bool) -> dict:
        choice = choose_for_pipeline(
            run_config=RunConfig(
                model=ModelConfig("resnet50"), cluster=ClusterConfig("auto")
            ).to_pipeline_parameter(),
            machines=4,
            gpus_per_machine=8,
            gpu="v100",
            interconnect=None,
            network_gbps=25.0,
            **reasons,
        )
        return {"cluster": choice.cluster, **json.loads(choice.recommendation_json)}

    plain = choose()
    ps = next(a for a in plain["alternatives"] if a["strategy"] == "parameter_server")
    # close enough that a reason for parameter servers lets them win (within 10 %, with margin)
    assert ps["predicted"]["examples_per_second"] > 0.95 * plain["predicted"]["examples_per_second"]
    assert plain["strategy"] == plain["cluster"].strategy == "multi_worker_mirrored"
    for reason in ({"async_ok": True}, {"preemptible": True}):
        chosen = choose(**reason)
        assert chosen["strategy"] == chosen["cluster"].strategy == "parameter_server", reason
        assert chosen["cluster"].ps >= 1


def test_the_compiled_pipelines_wire_async_ok_and_preemptible_to_the_select_step(tmp_path):
    from kfp import compiler

    from pipelines.comparison import build_comparison_pipeline
    from pipelines.training import build_training_pipeline

    for build in (build_comparison_pipeline, build_training_pipeline):
        path = tmp_path / f"{build.__name__}.json"
        compiler.Compiler().compile(build(), str(path))
        spec = json.loads(path.read_text())
        task = spec["root"]["dag"]["tasks"]["select-strategy"]["inputs"]["parameters"]
        for name in ("async_ok", "preemptible"):
            assert task[name] == {"componentInputParameter": name}
            assert spec["root"]["inputDefinitions"]["parameters"][name]["defaultValue"] is False


def test_the_pipelines_auto_cluster_keeps_the_runs_all_reduce_packs():
    """A run config's `all_reduce_pack_mb` reaches the select step's prediction and the
    cluster the pipeline trains. ResNet-50 on 4 x 8 V100 at 10 Gbit/s: with one pack the
    all-reduce stays in the step and one machine is advised; in 32 MB packs it overlaps
    back-propagation and all four machines train."""
    from components.core.config import ClusterConfig, ModelConfig, RunConfig
    from components.core.strategy_choice import choose_for_pipeline

    def choose(pack_mb: float):
        run = RunConfig(
            model=ModelConfig("resnet50"),
            cluster=ClusterConfig("auto", all_reduce_pack_mb=pack_mb),
        )
        return choose_for_pipeline(
            run_config=run.to_pipeline_parameter(), machines=4, gpus_per_machine=8,
            gpu="v100", interconnect=None, network_gbps=10.0,
        )  # fmt: skip

    plain, packed = choose(0.0), choose(32.0)
    assert (plain.cluster.strategy, plain.cluster.workers) == ("multi_worker_mirrored", 4)
    assert "All of them train" in plain.markdown  # below the floor in one pack
    assert "All of them train" not in packed.markdown
    assert (packed.cluster.strategy, packed.cluster.workers) == ("multi_worker_mirrored", 4)
    assert packed.cluster.all_reduce_pack_mb == 32


def test_the_select_step_takes_a_pilots_or_comparisons_measured_runs(tmp_path):
    """`history` (the training pipeline's parameter) replaces predictions with what
    matching runs measured, as `strategist select --history` does."""
    from components.core.config import ModelConfig, RunConfig
    from components.core.strategy_choice import choose_for_pipeline
    from tests.selection_helpers import _review_history

    run_config = RunConfig(model=ModelConfig("resnet50")).to_dict()
    run_config["cluster"]["strategy"] = "auto"
    hardware = dict(
        run_config=run_config, machines=4, gpus_per_machine=1, gpu="v100",
        interconnect=None, network_gbps=10.0,
    )  # fmt: skip
    predicted = choose_for_pipeline(**hardware)
    assert predicted.cluster.strategy == "multi_worker_mirrored"
    measured = _review_history(
        tmp_path,
        "Tesla V100-SXM2-16GB",
        [("one_device", 2000.0, 1, 0, 1), ("multi_worker_mirrored", 500.0, 4, 0, 1)],
    )
    choice = choose_for_pipeline(**hardware, history=f" {measured} ,")
    assert choice.cluster.strategy == "one_device"
    assert json.loads(choice.recommendation_json)["measured"]["examples_per_second"] == 2000.0
