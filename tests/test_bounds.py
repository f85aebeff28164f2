"""Every count a user gives is bounded, stated in --help and checked before launch; every
pipeline parameter is checked before `submit`/`schedule` sends it, by the function the
pipeline's own step runs (`promotion.check_settings`, `planning.check_plan`)."""

from __future__ import annotations

import pytest
from google.auth.credentials import AnonymousCredentials

from pipelines import cli
from tests.conftest import trainer_pids
from tests.test_schedule_submit import VERTEX, nothing_may_be_sent  # noqa: F401  (fixture)

HUGE = "9" * 5000


@pytest.mark.parametrize(
    ("pipeline", "param", "says"),
    [
        ("training", "promotion_margin=nan", "promotion_margin must be a number >= 0"),
        ("training", "promotion_margin=-0.5", "promotion_margin must be a number >= 0"),
        ("training", "promotion_margin=-inf", "promotion_margin must be a number >= 0"),
        ("training", f"promotion_margin={HUGE}", "promotion_margin must be a number >= 0"),
        ("training", "promotion_target=s3", "promotion_target 's3'"),
        ("training", "promotion_metric=accuracy; rm -rf /", "promotion_metric"),
        ("training", "promotion_metric=test_acc$(id)", "promotion_metric"),
        ("comparison", "repeats=100000000", "1 to 100"),
        ("comparison", "repeats=0", "1 to 100"),
        ("comparison", "clusters=[]", "no clusters to compare"),
        ("comparison", 'clusters=[{"strategy": "mirrored"}, {"strategy": "mirrored"}]', "twice"),
        ("comparison", "clusters=[1, 2]", "not a cluster object"),
        ("comparison", "run_config=" + "[" * 5000 + "]" * 5000, "nests deeper"),
    ],
)
def test_a_bad_pipeline_parameter_exits_2_before_sending(
    pipeline,
    param,
    says,
    capsys,
    nothing_may_be_sent,  # noqa: F811
):
    argv = ["submit", *VERTEX, "--pipeline", pipeline, "--param", param]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            "components.core.launch.credentials.google_credentials", lambda: AnonymousCredentials()
        )
        assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err and "Traceback" not in err, err


def run(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as exit_:
        return exit_.code


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["train", "--local", "--restarts", str(10**30)], "--restarts: must be 0 to 100"),
        (["train", "--local", "--steps-per-execution", "99999999999"], "1 to 100,000"),
        (["train", "--local", "--stall-timeout", str(10**12)], "0 to 604,800"),
        (["compare", "--repeats", "100000000"], "--repeats: must be 1 to 100"),
        (["compare", "--strategies", "mirrored,,"], "stray comma"),
        (
            [
                "select",
                "--machines",
                "1",
                "--gpus-per-machine",
                "1",
                "--compiled-metrics",
                "1000000000",
            ],
            "0 to 1,000",
        ),  # fmt: skip
        (["train", "--target", "kubeflow", "--backoff-limit", "-1"], "0 to 100"),
        (
            [
                "train",
                "--local",
                "--dataset",
                "digits",
                "--profile-steps",
                "1,99999999999999999999",
            ],
            "the trace is of the first epoch, which has",
        ),
    ],
)
def test_an_unbounded_count_exits_2_before_anything_starts(argv, says, capsys, tmp_path):
    out = tmp_path / "run"
    if argv[0] in ("train", "compare"):
        argv = [*argv, "--output", str(out)]
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err, err
    assert not (out / "status.json").exists() and trainer_pids(str(out)) == []


@pytest.mark.parametrize(
    ("command", "flag", "bound"),
    [
        ("train", "--restarts", "0 to 100"),
        ("train", "--steps-per-execution", "1 to 100,000"),
        ("train", "--stall-timeout", "604,800"),
        ("compare", "--repeats", "1 to 100"),
        ("select", "--compiled-metrics", "0 to 1,000"),
        ("train", "--backoff-limit", "0 to 100"),
        ("train", "--profile-steps", "B <= the epoch's steps"),
    ],
)
def test_help_states_each_bound(command, flag, bound, capsys):
    assert run([command, "--help"]) == 0
    out = capsys.readouterr().out
    start = out.index("\n  " + flag)  # the flag's own entry, not the usage line
    entry = " ".join(out[start : start + 600].split())
    assert bound in entry, entry
