"""The example notebook runs headless, and Explorer() renders there without a manual pn.extension()."""

from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "explorer.ipynb"


def test_example_notebook_executes_and_renders_the_explorer():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    display = nb.cells[1].outputs
    mimetypes = {m for o in display for m in o.get("data", {})}
    # Panel's notebook rendering: its JS extension was loaded for us and the view is a Bokeh doc
    assert "application/vnd.holoviews_exec.v0+json" in mimetypes, mimetypes
    assert any("application/javascript" in o.get("data", {}) or
               "application/vnd.holoviews_load.v0+json" in o.get("data", {}) for o in display)
    printed = "".join(o.get("text", "") for o in nb.cells[3].outputs)
    from attention_scaling import core
    st = core.compute_state(512, 1.0, 2288)
    assert (f"max weight: scaled {st.scaled.max_weight:.0%}, "
            f"unscaled {st.unscaled.max_weight:.0%}") in printed
    table = "".join(o.get("text", "") for o in nb.cells[5].outputs)
    assert "d_k= 4096" in table
