"""Re-runnable studies and benchmarks; each writes its report into docs/results/.

Run them from a source checkout: ``python -m analysis NAME --help`` (or ``cad-outlines study NAME``,
which runs that command in the checkout holding the current folder).
Each study module defines ``DESCRIPTION``, ``add_arguments(parser)`` and ``run(args)``.
"""
