"""Strategy selection: topology + model -> a recommended tf.distribute strategy.

The selector reasons the way a practitioner does and backs each rule with a
cost model whose constants are calibrated on published scaling results
(`data/published_scaling.json`; `docs/selection.md` shows every case with its
prediction and error).

Rules:

* one GPU -> `one_device`; one machine with several GPUs -> `mirrored`;
* several homogeneous machines on a fast network -> `multi_worker_mirrored`;
* heterogeneous or preemptible machines let `parameter_server` compete on
  throughput, whose prediction already holds that its workers neither wait for
  the slowest one nor die together (so it must be predicted at least as fast);
  acceptable asynchronous updates (or very many workers) favour it within a
  tolerance, and so do large sparse embedding tables (parameter servers hold
  the table and move only the rows a step touches);
* without such a reason a dense model stays synchronous, however much faster
  `parameter_server` is predicted: TF2's parameter servers are asynchronous,
  and stale gradients cost convergence that examples/s does not show;
* when parameters + gradients + Adam state + activations do not fit one GPU,
  data parallelism cannot run: `model_parallelism`, `"supported": false`.

Measured throughput on matching hardware (`comparison.json` records passed as
history) outranks the prediction. This package never imports kfp and imports
TensorFlow only when `model_profile.profile_model` must build a model.

Modules:

* `topology`: the hardware (`Topology`) and cluster shape (`Layout`);
* `cost_model`: fitted constants, step-time formulas, per-strategy predictions;
* `fit`: fits the constants on the training part of the published cases
  (`python -m components.core.selection.fit`) and reports the held-out part;
* `prediction`: the candidate strategies of a topology, each a `Prediction`;
* `history`: measured throughput from `comparison.json` files;
* `rules`: practitioner rules over the ranked candidates;
* `explanation`: the reasons, as sentences with numbers;
* `recommendation`: `recommend` and its answer, `Recommendation`;
* `evidence`: published cases, their blind sets, predictions and choices;
* `evidence_doc`: docs/selection.md from them
  (`python -m components.core.selection --evidence-table`).
"""

from components.core.selection.cost_model import (
    FITTED,
    FittedConstants,
    achievable_tflops,
    allreduce_across_machines_time,
    compute_time,
    exposed_communication,
    max_batch_that_fits,
    memory_needed_bytes,
    parameter_server_time,
    predict_allreduce,
    predict_parameter_server,
    ring_allreduce_time,
    step_compute_time,
)
from components.core.selection.evidence import (
    DATA_DIR,
    EVIDENCE_PATH,
    choice_rows,
    evidence_rows,
    load_evidence,
    median_absolute_error_pp,
    predict_case,
    split_summaries,
)
from components.core.selection.evidence_doc import evidence_table_markdown, main
from components.core.selection.history import apply_history, load_history
from components.core.selection.prediction import Prediction, candidates
from components.core.selection.recommendation import (
    MODEL_PARALLELISM,
    Recommendation,
    recommend,
)
from components.core.selection.topology import (
    PRECISIONS,
    Layout,
    Topology,
    keras_step_scalar_all_reduces,
)

__all__ = [
    "allreduce_across_machines_time",
    "DATA_DIR",
    "FITTED",
    "FittedConstants",
    "EVIDENCE_PATH",
    "MODEL_PARALLELISM",
    "PRECISIONS",
    "Layout",
    "Prediction",
    "Recommendation",
    "Topology",
    "achievable_tflops",
    "apply_history",
    "choice_rows",
    "split_summaries",
    "candidates",
    "compute_time",
    "evidence_rows",
    "evidence_table_markdown",
    "exposed_communication",
    "load_evidence",
    "load_history",
    "main",
    "max_batch_that_fits",
    "median_absolute_error_pp",
    "memory_needed_bytes",
    "parameter_server_time",
    "predict_allreduce",
    "predict_case",
    "predict_parameter_server",
    "keras_step_scalar_all_reduces",
    "recommend",
    "ring_allreduce_time",
    "step_compute_time",
]
