"""The short answer `strategist select` prints by default, and `--explain`."""

from __future__ import annotations

import re

import pytest

from pipelines.cli import main

# The ten everyday questions of issue 41.
EVERYDAY = {
    "4 t4, resnet50": "--machines 1 --gpus-per-machine 4 --gpu t4 --model resnet50",
    "8 x 1 v100, embedding": "--machines 8 --gpus-per-machine 1 --gpu v100 --network-gbps 10 "
    "--params 1e7 --gflops-per-example 0.1 --sparse-embedding-params 3.2e9 --embedding-dim 64",
    "7b on 8 a100-80gb": "--machines 1 --gpus-per-machine 8 --gpu a100-80gb --params 7e9",
    "mlp on a cpu": "--machines 1 --gpus-per-machine 1 --gpu cpu --model mlp",
    "bert-large 2 x 8 a100": "--machines 2 --gpus-per-machine 8 --gpu a100 --network-gbps 100 "
    "--model bert_large_squad",
    "20 preemptible t4": "--machines 20 --gpus-per-machine 1 --gpu t4 --preemptible "
    "--heterogeneous --params 25e6 --network-gbps 10",
    "4 x 4 v100 on 1 gbit/s": "--machines 4 --gpus-per-machine 4 --gpu v100 --network-gbps 1 "
    "--model resnet50",
    "one a100": "--machines 1 --gpus-per-machine 1 --gpu a100 --model resnet50",
    "1.3b gpt on 8 h100": "--machines 1 --gpus-per-machine 8 --gpu h100 --params 1.3e9",
    "a100 and t4 mix": "--machines 4 --gpus-per-machine 8 --gpu a100:2,t4:2 --network-gbps 25 "
    "--model resnet50",
}


@pytest.mark.parametrize("question", sorted(EVERYDAY))
def test_the_default_answer_is_at_most_12_lines_of_100_columns(question, capsys):
    assert main(["select", *EVERYDAY[question].split()]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert 3 <= len(lines) <= 12 and max(map(len, lines)) <= 100
    assert lines[0].startswith("recommended: ")
    assert lines[-1] == "--explain prints every reason and the full table." or (
        "not supported" in lines[0]
    )


def test_explain_prints_every_reason_and_the_table_without_numbers_for_what_cannot_run(
    capsys,
):
    argv = ["select", *EVERYDAY["8 x 1 v100, embedding"].split()]
    assert main(argv) == 0
    short = capsys.readouterr().out
    assert main([*argv, "--explain"]) == 0
    full = capsys.readouterr().out
    assert "reasons:" in full and "reasons:" not in short
    infeasible = [line for line in full.splitlines() if "(infeasible:" in line]
    assert infeasible  # mirrored and multi_worker_mirrored cannot hold the table
    for row in infeasible:
        layout, *cells = row.rsplit(")", 1)[1].split()
        assert layout.count("/") == 2 and set(cells) == {"-"}  # no speed, no price


def test_a_guess_that_flips_the_choice_is_said_in_the_first_two_lines(capsys):
    """The 1.3B GPT on 8 H100 without FLOPs: the choice differs at the estimate's ends."""
    assert main(["select", *EVERYDAY["1.3b gpt on 8 h100"].split()]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("depends on:") and "--gflops-per-example" in lines[1]
    assert main(["select", *EVERYDAY["1.3b gpt on 8 h100"].split(), "--gflops-per-example",
                 "16", "--json"]) == 0  # fmt: skip
    assert '"depends_on": []' in capsys.readouterr().out


def test_the_answer_gives_its_range_and_what_makes_it_wide(capsys):
    argv = "--machines 4 --gpus-per-machine 8 --gpu v100 --network-gbps 25 --model resnet50"
    assert main(["select", *argv.split(), "--precision", "mixed"]) == 0
    lines = capsys.readouterr().out.splitlines()
    predicted = next(line for line in lines if line.startswith("predicted:"))
    assert re.search(r"examples/s \([\d,]+-[\d,]+\), \d+% scaling efficiency \(\d+-\d+%\)",
                     predicted), predicted  # fmt: skip
    unsure = next(line for line in lines if line.startswith("unsure:"))
    assert "; measure " in unsure and "--history" in unsure
    # one GPU alone: its efficiency is 1 by definition, its speed is what is unknown
    assert main(["select", *EVERYDAY["one a100"].split()]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.endswith("100% scaling efficiency") for line in lines), lines
    assert "unsure:      one GPU's speed" in "\n".join(lines)


@pytest.mark.parametrize(("question", "why"), [
    ("one a100", "one device"),
    ("4 t4, resnet50", "one machine with several GPUs"),
    ("4 x 4 v100 on 1 gbit/s", "one machine, predicted faster than more"),
    ("bert-large 2 x 8 a100", "several machines, synchronous"),
    ("20 preemptible t4", "preemptible machines and machines of uneven speed: parameter servers"),
    ("8 x 1 v100, embedding", "a large sparse embedding table: parameter servers"),
])  # fmt: skip
def test_why_is_the_first_rule_that_holds(question, why, capsys):
    """`why:` names the rule that decided, from the answer's data (the first that holds)."""
    assert main(["select", *EVERYDAY[question].split()]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert next(line for line in lines if line.startswith("why:")).startswith(f"why:         {why}")
