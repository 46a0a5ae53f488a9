"""Sphinx extension: a Python cross-reference that cannot resolve skips Sphinx's "fuzzy" search.

With ``autodoc_typehints = "description"`` every type in a signature (``float``, ``np.ndarray``,
``Path``, ...) becomes a Python-domain cross-reference marked ``refspecific``. When no object of
that exact name exists (the builtins, numpy's and the standard library's types: most of them),
Sphinx looks for any object whose name *ends with* ``.<name>``, a scan of every documented object,
up to three times per reference (class, then data, then attribute). On this package's API that was
about a tenth of the documentation build's CPU.

An object's name ends with ``.<name>`` (or equals ``<name>``) only if its last dotted component is
``<name>``'s last one. So a reference whose last component is no documented object's last component
has no match in any search mode: this post-transform drops its ``refspecific`` mark (exact lookups
only), and Sphinx then finds nothing, as it would have after the scan, and renders the reference the
same way (plain text, or a builtin's name; no warning unless one would have been given). References
that could match are left alone, so an ambiguous one still warns ("more than one target found").
"""

from __future__ import annotations

from sphinx.addnodes import pending_xref
from sphinx.transforms.post_transforms import ReferencesResolver, SphinxPostTransform


def last_component(target: str) -> str:
    """The name a fuzzy search compares: the target's last dotted component, without a call's ``()``."""
    return target.removesuffix("()").rpartition(".")[2]


class UnresolvableXrefsSkipFuzzySearch(SphinxPostTransform):
    """Before the references are resolved: drop ``refspecific`` where no object could match (module doc)."""

    default_priority = ReferencesResolver.default_priority - 1

    def run(self, **kwargs) -> None:
        domain = self.env.get_domain("py")
        cached = getattr(domain, "_last_components", None)
        if cached is None or cached[0] != len(domain.objects):  # objects are fixed once reading ends
            cached = (len(domain.objects), {last_component(name) for name in domain.objects})
            domain._last_components = cached
        known = cached[1]
        for node in self.document.findall(pending_xref):
            if (node.get("refdomain") == "py" and node.hasattr("refspecific")
                    and last_component(node.get("reftarget", "")) not in known):
                del node["refspecific"]


def setup(app):
    app.add_post_transform(UnresolvableXrefsSkipFuzzySearch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
