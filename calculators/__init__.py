"""Pure NumPy calculators: plain numbers in, numbers plus explanation steps out.

Nothing here imports the web layer or the store; facts a request names by id are handed in
through a `Lookup` callable by the caller (see `calculators.core`).
"""

# Discover the families as soon as the package loads, so that importing one family module
# directly (`import calculators.kv_cache`) still registers every calculator exactly once.
from calculators import registry as _registry  # noqa: E402,F401
