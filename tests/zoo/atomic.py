"""Atomic writes for the zoo scripts: a reader (tests/test_zoo.c) never sees half a file."""
import os


def write_text(path, lines):
    """Write the lines, one per line, to path through a temporary file and a rename."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
