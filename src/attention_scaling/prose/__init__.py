"""Every word and number the explorer prints, composed from what core computed; none of it
loads Panel, Bokeh or param:

- :mod:`.formatting`: numbers as printed (significant digits, weights as percentages, numbers
  below float64's range, shares of draws)
- :mod:`.text`: the prose and formulas of every view (caption, guide, explanation, readout,
  each tab's "More detail", the training status)
- :mod:`.lead`: each tab's lead sentence and its "Try this"
- :mod:`.quiz`: each tab's predict-then-reveal question
"""
