"""Render the tab icon, assets/favicon.svg, to assets/favicon.png (64 x 64, transparent) in
headless Chromium; the page uses the PNG (why: src/attention_scaling/latency.py, 19).

    .venv/bin/python scripts/favicon.py [OUT.png]

Run it after editing the SVG; a test renders the SVG again and compares it with the PNG.
"""

import base64
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import CHROMIUM_ARGS, chromium_executable  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

SVG = ROOT / "assets" / "favicon.svg"
PNG = ROOT / "assets" / "favicon.png"
SIZE = 64


def render(page, svg: str, size: int = SIZE) -> bytes:
    """The SVG drawn by Chromium at ``size`` x ``size`` CSS pixels (scale 1), as PNG bytes."""
    src = "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")
    page.set_viewport_size({"width": size, "height": size})
    page.set_content(f"<style>html,body{{margin:0;background:transparent}}</style>"
                     f"<img src='{src}' width='{size}' height='{size}' style='display:block'>")
    page.wait_for_function("() => document.images[0].complete")
    return page.locator("img").screenshot(omit_background=True)


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else PNG
    with sync_playwright() as p:
        exe = chromium_executable()
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS) if exe \
            else p.chromium.launch(args=CHROMIUM_ARGS)
        out.write_bytes(render(browser.new_page(), SVG.read_text("utf-8")))
        browser.close()
    print(out)


if __name__ == "__main__":
    main()
