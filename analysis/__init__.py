"""Re-runnable studies and benchmarks; each writes its report into docs/results/.

Run them through the CLI from a source checkout: ``cad-outlines study NAME --help``.
Each study module defines ``DESCRIPTION``, ``add_arguments(parser)`` and ``run(args)``.
"""
