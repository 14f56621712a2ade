"""kiln.keras.utils: seeding and backend-state helpers (Keras' names)."""
from .. import _kiln

set_random_seed = _kiln.set_random_seed
clear_session = _kiln.clear_session
__all__ = ["set_random_seed", "clear_session"]
