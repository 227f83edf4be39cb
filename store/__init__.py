"""Everything producers and workers share through Redis: settings, Celery wiring, keys,
Lua scripts, the job store and the inbox run records. Imports neither side."""
