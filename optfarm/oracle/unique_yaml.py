"""YAML as the farm reads it: the safe loader, refusing a mapping that gives one key twice
(plain YAML keeps the last silently, so a second ``units:`` or ``constraints:`` would quietly
replace the first). Sweep specs and table descriptions are read with it."""

from __future__ import annotations

import yaml

__all__ = ["UniqueKeyLoader", "load_unique"]


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader; a key given twice in one mapping is a ``ConstructorError`` whose
    mark is the second occurrence's line."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_unique(text: str):
    """``text`` parsed as YAML with ``UniqueKeyLoader``."""
    return yaml.load(text, Loader=UniqueKeyLoader)
