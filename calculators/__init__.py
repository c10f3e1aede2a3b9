"""Pure NumPy calculators: plain numbers in, numbers plus explanation steps out.

Nothing here imports the web layer or the store; facts a request names by id are handed in
through a `Lookup` callable by the caller (see `calculators.framework`). `calculators.framework.registry` is the
table of every calculator; `calculators.framework.runner.run` is the one way to run one.
"""
