"""What the tests and the benchmarks share: starting and stopping the server's processes
(:mod:`.processes`), a client of the server that speaks Bokeh's websocket protocol as a page
does (:mod:`.bokeh_client`), and the fairness scenario (:mod:`.fairness`). Imported as
``testkit`` from the repository's root: pytest puts it on the path (``pythonpath`` in
pyproject.toml) and the benchmarks run as modules from there (``python -m
benchmarks.run``)."""
