"""Griffe extension for the API pages: parameter defaults come from the signature.

numpydoc lets an enumerated type (``{"naive", "CR1", "CR2"}``) list its default first,
and griffe reads it that way; evalmix's docstrings list the allowed values in their
natural order instead, so the first value is often not the default. The signature is the
truth: this extension copies its defaults into the parsed Parameters sections.
"""

from __future__ import annotations

from typing import Any

import griffe


def _fix(obj: griffe.Object, parameters: griffe.Parameters) -> None:
    if obj.docstring is None:
        return
    for section in obj.docstring.parsed:
        if section.kind is not griffe.DocstringSectionKind.parameters:
            continue
        for param in section.value:
            try:
                param.value = parameters[param.name].default
            except KeyError:
                continue


class SignatureDefaults(griffe.Extension):
    def on_function(self, *, func: griffe.Function, **kwargs: Any) -> None:
        _fix(func, func.parameters)

    def on_class(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        _fix(cls, cls.parameters)
