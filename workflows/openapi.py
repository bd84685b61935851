"""The OpenAPI document's components for the pydantic models a definition brings along.

Task forms and update payloads are declared per workflow type, so the API's
static schema names them as `Any` and each is added here as a component of its
own, which clients generate types from.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def add_model(
    components: dict[str, Any], name: str, model: type[BaseModel], *, title: str, about: str
) -> dict[str, str]:
    """Add `model`'s JSON schema to `components` as `name`, with its nested models beside it;
    return a reference to it. Its description is `about` followed by the model's docstring."""
    document = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for definition, part in document.pop("$defs", {}).items():
        components.setdefault(definition, part)
    document["title"] = title
    document["description"] = f"{about} {(model.__doc__ or '').strip()}".strip()
    components[name] = document
    return {"$ref": f"#/components/schemas/{name}"}
