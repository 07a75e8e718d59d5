"""Render the tab icon, assets/favicon.svg, to assets/favicon.png (64 x 64, transparent) in
headless Chromium. The page uses the PNG: Chromium fetches and decodes the tab icon again after
every address update (one per control change), and an SVG icon is a document of its own to
style, lay out and paint on the page's main thread each time.

    .venv/bin/python -m scripts.favicon [OUT.png]     (from the repository's root)

Run it after editing the SVG; a test draws the SVG again (testkit.browser.draw_svg, as here)
and compares it with the PNG.
"""

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

from testkit.browser import draw_svg
from testkit.processes import CHROMIUM_ARGS, chromium_executable

ROOT = Path(__file__).resolve().parents[1]
SVG = ROOT / "assets" / "favicon.svg"
PNG = ROOT / "assets" / "favicon.png"
SIZE = 64


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else PNG
    with sync_playwright() as p:
        exe = chromium_executable()
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS) if exe \
            else p.chromium.launch(args=CHROMIUM_ARGS)
        out.write_bytes(draw_svg(browser.new_page(), SVG.read_text("utf-8"), SIZE))
        browser.close()
    print(out)


if __name__ == "__main__":
    main()
