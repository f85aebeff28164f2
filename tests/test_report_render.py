"""report.html rendered by a real headless Chromium: it loads, shows the table and the plots.

Chromium is required, not optional: without it these tests fail and say how to
install it (`apt-get install chromium` on Debian).
"""

from __future__ import annotations

import os
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
    }


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("report")
    runs = [
        record("mirrored", 1650.0, 2, 0.9, [0.6, 0.85, 0.91, 0.93, 0.95]),
        record("multi_worker_mirrored", 1200.0, 2, 1.2, [0.58, 0.84, 0.9, 0.93, 0.945]),
        record("parameter_server", 700.0, 2, 2.0, [0.55, 0.8, 0.88, 0.91, 0.93]),
    ]
    report = build_report(runs, prices=PRICES, recommendation={"strategy": "mirrored"})
    paths = write_report(report, out)
    page = paths["report.html"]
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

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "data-name" in a:
            self.rows.append(a["data-name"])
        elif tag == "th":
            self.headers += 1
        elif tag == "img":
            self.images.append(a)
        self._in_title = tag == "title"

    def handle_data(self, data):
        if self._in_title:
            self.title += data


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
