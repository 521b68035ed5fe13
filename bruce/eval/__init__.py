"""``bruce eval`` (docs/eval.md): replay YAML cases through the real worker and agent loop, check
each reply in code, optionally score it with a judge model, and write a run folder to compare.

``cases`` loads and validates the case files, ``checks`` holds the expectations as pure
functions over ``observed`` turns, ``runner`` plays cases (each in its own folder and database,
with its ``clock``, capture ``channel`` and local web ``pages``), ``judge`` scores replies on the
rubric, ``report`` writes and reads a run, ``compare`` diffs two runs.
"""
