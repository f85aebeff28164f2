"""`strategist gate`: fail CI when a comparison regressed against a baseline."""

from __future__ import annotations

import argparse

DESCRIPTION = """\
Compare a comparison.json with a committed baseline, strategy by strategy, and
exit 1 when a strategy's throughput fell by more than --max-throughput-drop
(relative), its quality got worse than allowed, or a baseline strategy is
missing from the report. Quality is eval accuracy (allowed to fall by
--max-accuracy-drop, absolute) or, with --metric or a baseline compared on
--target-metric, another test metric (allowed to get worse by
--max-metric-change, relative: a loss, MAE, RMSE or MSE may rise by that much,
any other metric fall). Strategies new in the report are listed but not gated.
Exits 0 when nothing regressed and 2 when an input cannot be read, a threshold
is invalid, or a result lacks the gated metric (a regression report has no
accuracy: pass --metric mae, rmse, mse or loss).
"""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Adds `gate` to the `strategist` command."""
    parser = subparsers.add_parser(
        "gate",
        help="exit 1 when a comparison report regressed against a baseline",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  strategist gate runs/cmp/comparison.json --baseline baselines/comparison.json\n"
            "  strategist gate runs/cmp --baseline baselines --max-throughput-drop 0.2"
        ),
    )
    parser.add_argument(
        "report",
        metavar="REPORT.json",
        help="comparison.json of the run under test (or the folder holding it)",
    )
    parser.add_argument(
        "--baseline",
        required=True,
        metavar="BASELINE.json",
        help="comparison.json to compare against (or the folder holding it)",
    )
    parser.add_argument(
        "--max-throughput-drop",
        type=float,
        default=0.10,
        metavar="F",
        help="largest allowed relative drop in examples/s per strategy (default 0.10 = 10%%)",
    )
    parser.add_argument(
        "--max-accuracy-drop",
        type=float,
        default=0.02,
        metavar="F",
        help="largest allowed absolute drop in eval accuracy (default 0.02 = 2 points)",
    )
    parser.add_argument(
        "--metric",
        metavar="NAME",
        help="test metric to gate quality on: accuracy, loss, mae, rmse, mse or a metric the "
        "model compiles (default: the baseline's --target-metric, else accuracy)",
    )
    parser.add_argument(
        "--max-metric-change",
        type=float,
        default=0.05,
        metavar="F",
        help="largest allowed relative worsening of a --metric other than accuracy (default "
        "0.05: a loss or error 5%% higher, another metric 5%% lower)",
    )
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Prints what regressed (or that nothing did); returns 1 on a regression, else 0.

    Raises:
        ReportError: when an input cannot be read or a threshold is invalid
            (the CLI turns it into exit code 2).
    """
    from components.core.comparison import ReportError, gate, load_report, validate_thresholds
    from components.core.config import ConfigError

    validate_thresholds(args.max_throughput_drop, args.max_accuracy_drop, args.max_metric_change)
    # Exit 1 means "regressed" to a CI job: anything else that goes wrong while the two
    # files are read and weighed is an input gate cannot use, exit 2, never 1.
    try:
        report = load_report(args.report, role="report")
        baseline = load_report(args.baseline, role="baseline")
        result = gate(
            report,
            baseline,
            max_throughput_drop=args.max_throughput_drop,
            max_accuracy_drop=args.max_accuracy_drop,
            metric=args.metric,
            max_metric_change=args.max_metric_change,
        )
    except ConfigError:
        raise
    except Exception as err:  # noqa: BLE001  (a malformed file's shape, whatever it raises)
        raise ReportError(
            f"cannot gate {args.report} against {args.baseline}: a field of the wrong type or "
            f"shape ({type(err).__name__}: {str(err)[:200]}); pass comparison.json files "
            "written by strategist compare"
        ) from None
    print(result.summary())
    return 0 if result.passed else 1
