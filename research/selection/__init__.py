"""The strategy selector's research: published scaling cases, their blind sets, the fit of
the step-time model's constants and the evidence document.

It imports the product (`components.core.selection`), never the reverse. The product
keeps only the fitted constants it reads at run time (`components/core/data/step_time_fit.json`).

Modules:

* `published`: maps a published case onto the product's inputs, and costs a step the
  way the case's framework ran it (overlap, no per-step metrics, whole variables,
  servers at a worker machine's rate);
* `evidence`: the cases, their splits, predictions, errors and choices;
* `fit`: fits the constants (`python -m research.selection.fit`) and reports the
  held-out part;
* `evidence_doc`: the evidence document, `research/selection/evidence.md`
  (`python -m research.selection --evidence-table`).
"""
