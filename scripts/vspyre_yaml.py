"""YAML as vspyre's Python tools read it: PyYAML's safe loader, refusing a key given twice in one
mapping (PyYAML keeps the last one silently; the C++ config loader refuses it, and so do sweep
files and the validation table). Used by vspyre_sweep.py and vspyre_validate.py."""

import yaml


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.load(text, Loader=UniqueKeyLoader): a duplicate key raises ConstructorError at its mark."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for k, _ in node.value:
                if k.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(k, deep=True)
                try:
                    dup = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: the base class says so
                    continue
                if dup:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key '{key}'", k.start_mark)
        return super().construct_mapping(node, deep)
