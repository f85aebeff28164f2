"""report.html rendered by a real headless Chromium: it loads, shows the table and the plots.

Chromium is required, not optional: without it these tests fail and say how to
install it (`apt-get install chromium` on Debian).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from components.core.comparison import PLOT_FILES, PriceTable, build_report, write_report

WIDTH, HEIGHT = 1280, 2000
PRICES = PriceTable("2026-01-01", "test table", {"n1-standard-4": 0.19})


def chromium() -> str:
    for candidate in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(candidate)
        if found:
            return found
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    pytest.fail(
        "headless Chromium is needed to render report.html and was not found: "
        "run `apt-get install -y chromium` (Debian) and re-run the tests"
    )


def run_chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},{HEIGHT}",
        *args,
        page.as_uri(),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def record(strategy: str, eps: float, replicas: int, seconds: float, acc: list[float]) -> dict:
    elapsed = [seconds * (i + 1) + 1.0 for i in range(len(acc))]
    return {
        "strategy": strategy,
        "model": "mlp",
        "dataset": "digits",
        "num_replicas": replicas,
        "workers": 2 if strategy != "mirrored" else 1,
        "ps": 1 if strategy == "parameter_server" else 0,
        "global_batch_size": 32 * replicas,
        "epochs": len(acc),
        "epoch_seconds": [elapsed[0]] + [seconds] * (len(acc) - 1),
        "examples_per_second": eps,
        "wall_seconds": elapsed[-1],
        "elapsed_at_epoch_end": elapsed,
        "history": {"loss": [1.2 - a for a in acc], "accuracy": acc},
        "eval_accuracy": acc[-1],
        "eval_loss": 1.2 - acc[-1],
        "schema_version": 2,
        "hardware": {
            "platform": "local",
            "processes": 1 if strategy == "mirrored" else 4,
            "logical_devices_per_machine": 2 if strategy == "mirrored" else 0,
            "cpu_model": "AMD EPYC",
            "cpu_cores": 2,
            "memory_gb": 23.5,
        },
        "phase_seconds": {
            "startup": 2.5 if strategy == "mirrored" else 9.0,
            "setup": 0.3,
            "fit": elapsed[-1] + 0.4,
            "epochs": elapsed[-1],
            "export": 0.3,
            "evaluate": 0.1,
        },
    }


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("report")
    runs = [
        record("mirrored", 1650.0, 2, 0.9, [0.6, 0.85, 0.91, 0.93, 0.95]),
        record("multi_worker_mirrored", 1200.0, 2, 1.2, [0.58, 0.84, 0.9, 0.93, 0.945]),
        record("parameter_server", 700.0, 2, 2.0, [0.55, 0.8, 0.88, 0.91, 0.93]),
    ]
    # `--repeats 2`: a second, slightly slower run of each, interleaved.
    runs += [
        record(r["strategy"], r["examples_per_second"] * 0.9, 2, seconds, r["history"]["accuracy"])
        for r, seconds in zip(runs, (1.0, 1.3, 2.2), strict=True)
    ]
    recommendation = {
        "strategy": "mirrored",
        "inputs": {"topology": {"machines": 1, "gpus_per_machine": 2, "gpu": "t4"}},
    }
    report = build_report(runs, prices=PRICES, recommendation=recommendation)
    paths = write_report(report, out)
    page = Path(paths["report.html"])
    profile = tmp_path_factory.mktemp("chromium-profile")
    dom = run_chromium(page, profile, "--dump-dom")
    shot = out / "screenshot.png"
    screenshot = run_chromium(page, profile, f"--screenshot={shot}")
    return {"report": report, "dom": dom, "screenshot": screenshot, "png": shot}


class DomParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[str] = []
        self.images: list[dict[str, str]] = []
        self.headers = 0
        self.title = ""
        self._in_title = False
        self.text: list[str] = []  # every text node of the page
        self.by_id: dict[str, str] = {}  # text inside elements with an id
        self.cells: dict[str, list[str]] = {}  # table cell texts by data-key
        self._open: list[tuple[str, str | None, str | None]] = []  # (tag, id, data-key)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag not in ("img", "meta", "br", "span"):
            self._open.append((tag, a.get("id"), a.get("data-key") if tag == "td" else None))
        if tag == "tr" and "data-name" in a:
            self.rows.append(a["data-name"])
        elif tag == "th":
            self.headers += 1
        elif tag == "img":
            self.images.append(a)
        self._in_title = tag == "title"

    def handle_endtag(self, tag):
        if tag in ("img", "meta", "br", "span"):
            return
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        self.text.append(data)
        for _, element_id, _ in self._open:
            if element_id:
                self.by_id[element_id] = self.by_id.get(element_id, "") + data
        if self._open and self._open[-1][2]:
            self.cells.setdefault(self._open[-1][2], []).append(data.strip())


@pytest.fixture(scope="module")
def page(rendered) -> DomParser:
    """The DOM that Chromium rendered, parsed."""
    assert rendered["dom"].returncode == 0, rendered["dom"].stderr[-2000:]
    parser = DomParser()
    parser.feed(rendered["dom"].stdout)
    return parser


def test_chromium_loads_the_page_with_its_table_and_plots(rendered):
    dom = rendered["dom"]
    assert dom.returncode == 0, dom.stderr[-2000:]
    parser = DomParser()
    parser.feed(dom.stdout)
    assert parser.title.startswith("Strategy comparison")
    assert parser.rows == [r["name"] for r in rendered["report"]["results"]]
    assert parser.headers >= 10
    assert [img.get("data-plot") for img in parser.images] == list(PLOT_FILES)
    for img in parser.images:
        assert img["src"].startswith("data:image/png;base64,")
        assert len(img["src"]) > 10_000, "plot image is suspiciously small"


def test_the_screenshot_shows_a_page_with_coloured_plots(rendered):
    shot = rendered["screenshot"]
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert rendered["png"].exists(), shot.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(rendered["png"])[..., :3]
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    assert pixels.std() > 0.05, "the screenshot is blank"
    # Strongly coloured pixels come from the plots' bars and lines (the page
    # itself is grey and white apart from small swatches): a page whose images
    # did not decode has almost none.
    saturation = pixels.max(axis=2) - pixels.min(axis=2)
    coloured = float((saturation > 0.35).mean())
    assert coloured > 0.01, f"only {coloured:.2%} coloured pixels: are the plots missing?"
    # Text in the table area: dark pixels in the top third (title, winner, table).
    top = pixels[: HEIGHT // 3]
    assert float((top.mean(axis=2) < 0.3).mean()) > 0.005, "no text rendered near the top"
    assert np.isfinite(pixels).all()


def test_the_page_states_the_hardware_and_that_this_was_a_cpu_rehearsal(page):
    hardware = page.by_id["hardware"]
    assert "Measured on local: 1 machine(s), AMD EPYC (2 cores, 23.5 GB), no GPU" in hardware
    assert "2 logical CPU devices per machine: mirrored" in hardware
    assert "4 processes: multi_worker_mirrored, parameter_server" in hardware
    rehearsal = page.by_id["rehearsal"]
    assert "local CPU rehearsal" in rehearsal and "does not predict GPU throughput" in rehearsal
    # The recommendation is a t4 prediction: not called an agreement with a CPU measurement.
    text = " ".join(page.text)
    assert "Predicted for 2 x t4 on 1 machine(s)" in text
    assert "Agrees with the measured winner" not in text


def test_the_page_shows_where_each_strategys_time_went(page, rendered):
    import base64
    import io

    import matplotlib.image

    phases = next(img for img in page.images if img.get("data-plot") == "phases.png")
    assert "Where each run's time went" in phases["alt"]
    png = base64.b64decode(phases["src"].split(",", 1)[1])
    pixels = matplotlib.image.imread(io.BytesIO(png))[..., :3]
    # Each phase has its own colour: the stacked bars show several of them.
    colours = {(round(r, 1), round(g, 1), round(b, 1)) for r, g, b in pixels.reshape(-1, 3)}
    saturated = {c for c in colours if max(c) - min(c) > 0.3}
    assert len(saturated) >= 4, saturated


def test_no_efficiency_above_100_percent_is_shown_without_a_baseline(page, rendered):
    assert rendered["report"]["baseline"]["kind"] == "none"
    assert page.cells["scaling_efficiency"] == ["n/a"] * 3
    assert page.cells["speedup"] == ["n/a"] * 3
    text = " ".join(page.text)
    assert "No one_device run" in page.by_id["baseline"] and "n/a" in page.by_id["baseline"]
    shown = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)\s?%", text)]
    assert shown and max(shown) <= 100.0, shown


def test_the_page_shows_the_median_and_spread_of_repeated_runs(page, rendered):
    report = rendered["report"]
    assert report["repeats"] == 2
    spread = page.by_id["spread"]
    for r in report["results"]:
        low, high = (r["spread"]["seconds_per_epoch"][k] for k in ("min", "max"))
        # The row's cells: name, N, then wall per epoch as median (min–max).
        assert f"{r['name']}2{r['seconds_per_epoch']:.2f} ({low:.2f}–{high:.2f})" in spread
    text = " ".join(page.text)
    assert "Spread over repeated runs (median, min–max over N interleaved runs" in text
    assert "How the winner is decided (each strategy's median over 2 interleaved runs)" in text
    # The winner card names the winner, or says plainly that there is none.
    assert page.by_id["winner"] == (report["winner"] or "no clear winner")
