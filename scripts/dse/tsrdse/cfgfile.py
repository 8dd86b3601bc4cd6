# Run the tessera CLI on a config held in memory: the CLI reads configs from
# files, so every check (config show, the JIT probe, emit-sv) writes the
# point to a temporary JSON file first. One place does that and cleans up.

import json
import os
import subprocess
import tempfile


def run_on_config(cfg, argv, prefix="dse-", cwd_tmp=False):
    """Write cfg to <tmpdir>/point.json and run argv with "{cfg}" and "{dir}" in its items
    replaced by that file and its directory. Returns (CompletedProcess, config path, files):
    files maps the name of every other file the command left in the directory to its text
    (the directory is gone on return). cwd_tmp runs the command inside the directory."""
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        cp = os.path.join(d, "point.json")
        with open(cp, "w") as f:
            json.dump(cfg, f)
        args = [a.replace("{cfg}", cp).replace("{dir}", d) for a in argv]
        # (errors="replace": the CLI may echo bytes of a bad file; a message is text either way)
        p = subprocess.run(args, capture_output=True, text=True, errors="replace", cwd=d if cwd_tmp else None)
        files = {}
        for name in os.listdir(d):
            if name != "point.json" and os.path.isfile(os.path.join(d, name)):
                with open(os.path.join(d, name), encoding="utf-8", errors="replace") as f:
                    files[name] = f.read()
    return p, cp, files
