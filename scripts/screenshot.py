"""Take the README screenshot: serve the app, open it in headless Chromium, save a PNG.

    .venv/bin/python -m scripts.screenshot [OUT.png] [QUERY]     (from the repository's root)

Uses the same server and browser setup as the tests (testkit/processes.py).
"""

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

from testkit.processes import CHROMIUM_ARGS, Server, chromium_executable

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "assets" / "screenshot.png"
    query = sys.argv[2] if len(sys.argv) > 2 else ""
    srv = Server()
    try:
        with sync_playwright() as p:
            exe = chromium_executable()
            browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS) if exe \
                else p.chromium.launch(args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 1400})
            page.goto(srv.url + query)
            page.wait_for_selector(".bk-Canvas, canvas", timeout=30_000)
            page.wait_for_timeout(3000)
            page.screenshot(path=str(out), full_page=True)
            browser.close()
    finally:
        srv.stop()
    print(out)


if __name__ == "__main__":
    main()
