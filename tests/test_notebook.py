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
    from attention_scaling.state import ExplorerState
    from attention_scaling.prose.text import fields_of, weight_label
    # the notebook prints the page's own wording and numbers for the same state
    f = fields_of(ExplorerState(d_k=512, rule="none"))
    assert f"max weight: scaled {f['sqrt_max_w']}, unscaled {f['none_max_w']}" in printed
    assert f"‖∂p/∂q‖_F: scaled {f['sqrt_grad']}, unscaled {f['none_grad']}" in printed
    assert f"typical draw (median of {f['mc_n']}): scaled {f['mc_s']}, unscaled {f['mc_u']}" in printed
    table = "".join(o.get("text", "") for o in nb.cells[5].outputs)
    st = core.compute_state(4096, 1.0, 2288)
    assert f"d_k= 4096  max weight scaled {weight_label(st.scaled):>6}  unscaled {weight_label(st.unscaled):>6}" in table
    assert "100%" not in table          # every weight here is below 1: never printed as 100%
