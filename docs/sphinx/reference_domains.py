"""Sphinx domains for what xlabind documents besides Python: its Bazel macros
(`bzl:macro`) and its native helpers for handler authors (`native:helper`,
`native:header`); and `parameter` entries for the constructors' shared
parameters. Each entry is a link target, an index entry and a search result.

    .. bzl:macro:: xlabind_extension(name, handlers, ...)     {bzl:macro}`xlabind_extension`
    .. native:helper:: CheckShape                             {native:helper}`CheckShape`
    .. native:header:: shapes.h                               {native:header}`shapes.h`
    .. parameter:: vmap_method                                {param}`vmap_method`
"""

from __future__ import annotations

import re

from sphinx import addnodes
from sphinx.directives import ObjectDescription
from sphinx.domains import Domain, ObjType
from sphinx.roles import XRefRole
from sphinx.util.docfields import Field, GroupedField
from sphinx.util.nodes import make_refnode


class _Entry(ObjectDescription):
    """One documented object: its signature shown as written, named by the
    part before any parenthesis. Its docstring's fields (``:param x:``,
    ``:returns:``) render as the Python entries' do: "Parameters", a list."""

    doc_field_types = [
        GroupedField(
            "parameter",
            label="Parameters",
            names=("param", "parameter", "arg", "argument", "keyword", "kwarg"),
            can_collapse=True,
        ),
        Field("returnvalue", label="Returns", has_arg=False, names=("returns", "return")),
    ]

    def handle_signature(self, sig: str, signode) -> str:
        signode += addnodes.desc_name(sig, sig)
        return re.split(r"[(\s]", sig.strip(), maxsplit=1)[0]

    def add_target_and_index(self, name: str, sig: str, signode) -> None:
        domain = self.env.get_domain(self.domain)
        # The name as written (XLABIND_RETURN_IF_ERROR, errors.h): ids may hold them.
        anchor = f"{self.domain}-{self.objtype}-{name}"
        signode["ids"].append(anchor)
        domain.note(self.objtype, name, anchor)
        label = domain.object_types[self.objtype].lname
        self.indexnode["entries"].append(("single", f"{name} ({label})", anchor, "", None))

    def _toc_entry_name(self, sig_node) -> str:
        return sig_node.astext().split("(")[0]

    def _object_hierarchy_parts(self, sig_node) -> tuple[str, ...]:
        return (sig_node.astext().split("(")[0],)


class _ReferenceDomain(Domain):
    """Objects by (type, name); `{domain:type}` roles resolve to them."""

    initial_data = {"objects": {}}

    def note(self, objtype: str, name: str, anchor: str) -> None:
        self.data["objects"][(objtype, name)] = (self.env.docname, anchor)

    def clear_doc(self, docname: str) -> None:
        for key, (doc, _) in list(self.data["objects"].items()):
            if doc == docname:
                del self.data["objects"][key]

    def merge_domaindata(self, docnames, otherdata) -> None:
        for key, (doc, anchor) in otherdata["objects"].items():
            if doc in docnames:
                self.data["objects"][key] = (doc, anchor)

    def resolve_xref(self, env, fromdocname, builder, typ, target, node, contnode):
        found = self.data["objects"].get((typ, target))
        if found is None:
            return None
        return make_refnode(builder, fromdocname, found[0], found[1], contnode, target)

    def resolve_any_xref(self, env, fromdocname, builder, target, node, contnode):
        return [
            (
                f"{self.name}:{typ}",
                self.resolve_xref(env, fromdocname, builder, typ, target, node, contnode),
            )
            for typ in self.object_types
            if (typ, target) in self.data["objects"]
        ]

    def get_objects(self):
        for (typ, name), (docname, anchor) in self.data["objects"].items():
            yield name, name, typ, docname, anchor, 1


def _domain(name: str, label: str, types: dict[str, str]) -> type[Domain]:
    return type(
        f"{name.title()}Domain",
        (_ReferenceDomain,),
        {
            "name": name,
            "label": label,
            "object_types": {typ: ObjType(lname, typ) for typ, lname in types.items()},
            "directives": dict.fromkeys(types, _Entry),
            "roles": {typ: XRefRole() for typ in types},
            "initial_data": {"objects": {}},
        },
    )


BazelDomain = _domain("bzl", "Bazel", {"macro": "Bazel macro"})
NativeDomain = _domain(
    "native", "Native helpers", {"helper": "native helper", "header": "helper header"}
)


def setup(app):
    app.add_domain(BazelDomain)
    app.add_domain(NativeDomain)
    app.add_object_type(
        "parameter",
        "param",
        objname="constructor parameter",
        indextemplate="single: %s (constructor parameter)",
    )
    return {"parallel_read_safe": True, "parallel_write_safe": True}
