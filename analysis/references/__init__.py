"""References the studies and tests check the library against (no study here): the independent legality
checker (:mod:`.legality_checker`, shares no code with the engine) and the quadratic oracle-program DP
(:mod:`.oracle_quadratic`). Tests import them from here; the package never does."""
