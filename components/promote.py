"""KFP component: promote a blessed model (pointer file or Vertex AI Model Registry)."""

from typing import NamedTuple

from kfp.dsl import Artifact, Input, Model, Output


def promote(
    model: Input[Model],
    metric_value: float,
    promoted: Output[Artifact],
    promotion_target: str = "pointer",
    promotion_root: str = "",
    promotion_metric: str = "test_accuracy",
    model_display_name: str = "strategist-model",
    serving_image: str = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest",
    cloud_config: dict = {},  # noqa: B006  (KFP takes a literal default)
    pipeline_root: str = "",
    run_id: str = "",
) -> NamedTuple("Outputs", where=str):
    """Records a blessed model as the promoted one.

    The pipeline runs this step only for a model the evaluate step blessed.
    `pointer` writes promoted.json (model URI, metric, value, run id, time)
    atomically under promotion_root; `vertex` uploads the SavedModel to the
    Vertex AI Model Registry as the new default version of model_display_name,
    with the metric in its labels.

    Args:
        model: the blessed SavedModel.
        metric_value: its value of promotion_metric.
        promotion_target: pointer or vertex.
        promotion_root: folder, /gcs/ or gs:// path of promoted.json; empty:
            beside the pipeline root.
        promotion_metric: the metric the model was blessed on.
        model_display_name: Vertex AI Model Registry display name (vertex target).
        serving_image: prediction container of the registered model (vertex target).
        cloud_config: the CloudConfig; its project and region locate the registry.
        pipeline_root: the run's pipeline root (set by the pipeline).
        run_id: the pipeline run (set by the pipeline).

    Returns:
        promoted: the promotion record (JSON), for lineage in the KFP UI.
        where: where the promotion was recorded: the pointer's path or the
            model version.
    """
    import json
    from collections import namedtuple

    from components.core import promotion, storage

    store = promotion.pipeline_store(
        promotion_target,
        promotion_root,
        pipeline_root,
        model_display_name,
        cloud_config,
        serving_image,
    )
    if store is None:
        raise ValueError("promotion_target none promotes nothing: use pointer or vertex")
    record = promotion.Promoted(
        model_uri=model.uri,
        metric=promotion_metric,
        value=metric_value,
        run_id=run_id,
        promoted_at=promotion.now_iso(),
    )
    where = store.promote(record)
    storage.write_text(promoted.path, json.dumps({**record.to_dict(), "where": where}, indent=2))
    promoted.metadata.update({"where": where, **record.to_dict()})
    print(f"promote: {record.metric}={record.value:.4f} recorded at {where}")
    return namedtuple("Outputs", ["where"])(where)
