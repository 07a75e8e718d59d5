"""The benchmarks (`make bench`: run.py; `make loadtest`: loadtest.py), run as modules from the
repository's root (``python -m benchmarks.run``), where testkit/ is found."""
