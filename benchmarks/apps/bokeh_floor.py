"""The floor: a plain Bokeh server app doing the same update as the explorer.

A Bokeh Slider over the same head widths; on change, core recomputes and the same
Charts.update replaces the data. No Panel. Served by `bokeh serve` in the benchmarks.
"""

from bokeh.io import curdoc
from bokeh.layouts import column, row
from bokeh.models import Slider

from attention_scaling import core
from attention_scaling.figures import Charts

values = list(core.D_K_VALUES)
charts = Charts()
state = {"d_k": 64}
slider = Slider(title="Head width d_k", start=0, end=len(values) - 1,
                value=values.index(64), step=1)


def refresh() -> None:
    charts.update(core.compute_state(state["d_k"], 1.0, 2288), True)


def on_change(_attr, _old, new) -> None:
    state["d_k"] = values[new]
    refresh()


slider.on_change("value", on_change)
refresh()
curdoc().add_root(column(slider, row(charts.scaled_fig, charts.unscaled_fig),
                         charts.jacobian_fig, charts.diagonal_fig))
