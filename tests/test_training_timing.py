"""Where a training process's time goes: the process-age clock and the printed line."""

from __future__ import annotations

import subprocess
import sys
import time

from components.core import training


def test_process_age_of_a_fresh_process_is_within_its_wall_time():
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(0.5); "
            "from components.core.training import seconds_since_process_start as age; "
            "print(age())",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    wall = time.monotonic() - started
    age = float(done.stdout)
    # It slept 0.5 s before asking; /proc ticks are 10 ms.
    assert 0.45 <= age <= wall + 0.02, (age, wall)


def test_phases_line_names_every_phase_and_unknowns():
    line = training.format_phases(
        {"startup": None, "setup": 1.25, "fit": 30.0, "epochs": 28.0, "export": 0.5, "evaluate": 2}
    )
    assert line == (
        "time: start-up ?, set-up 1.2s, fit 30.0s (28.0s in epochs), export 0.5s, evaluation 2.0s"
    )
