"""Think (seed 000 §4): the personality framework, the think prompt and its answer, and the
opinion network."""
