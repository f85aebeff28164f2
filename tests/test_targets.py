"""One target vocabulary: `vertex` and `kubeflow`, with `kfp` another name for `kubeflow`."""

from __future__ import annotations

import pytest

from components.core import targets
from components.core.config import BACKENDS
from pipelines import cli


def test_kfp_is_an_alias_of_kubeflow():
    assert targets.TARGETS == ("vertex", "kubeflow")
    assert targets.canonical("kfp") == "kubeflow"
    assert [targets.canonical(t) for t in targets.TARGETS] == list(targets.TARGETS)
    assert targets.canonical("mars") == "mars"  # unknown names are left for the caller to refuse
    assert ("local", *targets.TARGETS) == BACKENDS


COMMANDS = [
    ["train", "--image", "IMAGE"],
    ["compile", "--pipeline", "training", "-o", "out.yaml"],
    ["submit", "--pipeline", "training"],
    ["schedule", "--pipeline", "training", "--cron", "0 3 * * *"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: argv[0])
@pytest.mark.parametrize(("given", "meant"), [("kfp", "kubeflow"), ("kubeflow", "kubeflow")])
def test_every_target_flag_takes_the_alias_and_gives_the_canonical_name(argv, given, meant):
    args = cli.build_parser().parse_args([*argv, "--target", given])
    assert args.target == meant


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: argv[0])
def test_unknown_targets_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args([*argv, "--target", "aws"])
    assert exit_.value.code == 2
    assert "invalid choice: 'aws'" in capsys.readouterr().err


def test_library_entry_points_take_the_alias_too():
    from pipelines import submission
    from pipelines.compile import placement_for

    assert placement_for("kfp", "t4", 1).target == "kubeflow"
    assert submission.Submission(target="kfp", pipeline="training").target == "kubeflow"
    assert submission.validate_cron("0 3 * * 1", "kfp") == "0 0 3 * * 1"
