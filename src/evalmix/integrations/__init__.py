"""Harness glue: evalmix inside the tools users run.

:mod:`evalmix.integrations.inspect` holds an Inspect ``@metric`` (:func:`~evalmix.
integrations.inspect.cluster_ci`, CR2/Satterthwaite intervals by a sample-metadata
cluster) and a ``Hooks`` subclass, registered through the ``inspect_ai`` entry point,
that writes an evalmix report or paired comparison at the end of an eval set;
:mod:`evalmix.integrations.lm_eval_results` writes evalmix numbers back into lm-eval's results
layout. This package may import anything (the harnesses, every evalmix layer); nothing
in the core imports it (an import-linter contract in ``pyproject.toml``).
"""
