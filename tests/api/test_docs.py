from __future__ import annotations

import importlib.util
from pathlib import Path

from pydantic import BaseModel

from muster.api.registry import kinds

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_api", DOCS / "gen_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def test_api_reference_is_current():
    assert (DOCS / "api.md").read_text() == GEN.render(), "docs/api.md is stale: run python docs/gen_api.py"


def test_every_field_of_every_kind_has_a_description():
    missing = []
    seen: set[type[BaseModel]] = set()
    queue: list[type[BaseModel]] = [info.model for info in kinds()]
    while queue:
        model = queue.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            if not (field.description or "").strip():
                missing.append(f"{model.__name__}.{name}")
            queue.extend(GEN._models_in(field.annotation))
    assert missing == []
