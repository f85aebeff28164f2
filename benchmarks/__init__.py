"""Benchmarks: Strategist against bare hand-written TensorFlow, measured in the same run.

Run them from the repository root as modules, e.g. `python -m benchmarks.run_all`
(what `make bench` calls) or `python -m benchmarks.overhead --help`.
"""
