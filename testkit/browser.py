"""What the tests and the scripts draw in a browser page of their own."""

from __future__ import annotations


def draw_svg(page, svg: str, size: int) -> bytes:
    """``svg`` drawn by the browser of ``page`` at ``size`` x ``size`` CSS pixels (scale 1) on a
    transparent background, as PNG bytes: how scripts/favicon.py makes the tab icon, and how
    a test checks it."""
    import base64
    src = "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")
    page.set_viewport_size({"width": size, "height": size})
    page.set_content(f"<style>html,body{{margin:0;background:transparent}}</style>"
                     f"<img src='{src}' width='{size}' height='{size}' style='display:block'>")
    # complete is also true for an image that failed to load: that one has no natural size
    page.wait_for_function("() => document.images[0].complete")
    if not page.evaluate("() => document.images[0].naturalWidth > 0"):
        raise ValueError("the browser could not draw this SVG")
    return page.locator("img").screenshot(omit_background=True)
