"""A hook provider for the tests: machines in a JSON file; ``FAIL`` in the file's folder makes
every call fail, ``SLEEP`` makes it hang, ``GHOST`` makes machines run that never register."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

state = Path(sys.argv[1])
action = sys.argv[2]
body = json.loads(sys.stdin.read() or "{}")
if (state.parent / "FAIL").exists():
    print("quota exceeded in zone-a", file=sys.stderr)
    sys.exit(3)
if (state.parent / "SLEEP").exists():
    time.sleep(30)
machines = json.loads(state.read_text()) if state.exists() else {}
if action == "create":
    claim = body["claim"]
    machines.setdefault(
        claim,
        {"claim": claim, "providerId": f"hook://{claim}", "state": "running", "nodeName": f"ghost-{claim}"},
    )
    state.write_text(json.dumps(machines))
    print(json.dumps(machines[claim]))
elif action == "get":
    print(json.dumps(machines.get(body["claim"])))
elif action == "list":
    print(json.dumps(list(machines.values())))
elif action == "delete":
    machines.pop(body["claim"], None)
    state.write_text(json.dumps(machines))
    print("{}")
